"""The rule codes, known from the rules' file names (``rules/gm101_inference_block.py`` is GM101).

Checking a code in the settings must not import the rules: they import the analysis, which imports
the settings (and a plain run that names no code stays cheap). ``tests/test_rules.py`` checks that
these are the codes the rule classes claim.
"""
from __future__ import annotations

import functools
import os
import pkgutil
import re

_RULE_MODULE = re.compile(r"(gm\d+)_\w+\Z")


@functools.lru_cache(maxsize=1)
def rule_codes() -> tuple[str, ...]:
    """Every rule's code, sorted (``GM101``, ..., ``GM202``): what ``lints.rules.ALL_RULES`` holds."""
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules")
    names = (info.name for info in pkgutil.iter_modules([folder]))  # as the rules package discovers them
    return tuple(sorted(match.group(1).upper() for match in map(_RULE_MODULE.match, names) if match))
