"""libcst codemod commands for gradmode-lint.

Run with ``python -m libcst.tool codemod -x codemods.gradmode.FixInferenceMode PATH``
anywhere, or without ``-x`` where ``.libcst.codemod.yaml`` lists
``lints.libcst_commands`` in ``modules`` (this repository's does).
"""
