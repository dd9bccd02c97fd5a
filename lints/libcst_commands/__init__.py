"""Lets ``python -m libcst.tool codemod codemods.gradmode.FixInferenceMode`` work without ``-x``.

libcst.tool looks a command up as ``<configured module>.<command module>``; with
``lints.libcst_commands`` configured, ``codemods.gradmode`` resolves to our
``codemods.gradmode`` (the same module object, not a second copy).
"""
import sys

import codemods
import codemods.gradmode

sys.modules[__name__ + ".codemods"] = codemods
sys.modules[__name__ + ".codemods.gradmode"] = codemods.gradmode
