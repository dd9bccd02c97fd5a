"""libcst codemod commands: the same fixes as ``python -m lints.codemod``.

They reuse the linter's engine (alias resolution, path classifier, rules) and
its fixer; nothing here decides what is a finding.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext, SkipFile

from lints.config import load_config, split_codes
from lints.engine import analyze_module, might_match, without_noqa
from lints.fixer import STYLES, apply_fixes, plans_to_apply


class FixInferenceMode(CodemodCommand):
    DESCRIPTION = ("Remove torch.inference_mode() from warmup/autotune/CUDA-graph capture paths "
                   "(gradmode-lint GM101-GM104 fixes).")

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument("--style", choices=STYLES, default="remove",
                                help="remove the wrapper (default) or use torch.no_grad()")
        arg_parser.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes marked unsafe")
        arg_parser.add_argument("--gradmode-config", default=None, help="pyproject.toml with [tool.gradmode]")
        arg_parser.add_argument("--select", default=None, help="comma-separated codes or prefixes")

    def __init__(self, context: CodemodContext, style: str = "remove", unsafe_fixes: bool = False,
                 gradmode_config: Optional[str] = None, select: Optional[str] = None) -> None:
        super().__init__(context)
        config, _ = load_config(Path(gradmode_config) if gradmode_config else None)
        if select:
            config = config.replace(select=split_codes([select]))
        self.config = config
        self.style = style
        self.unsafe_fixes = unsafe_fixes

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        source = tree.code
        if not might_match(source, self.config, self.context.filename or ""):
            raise SkipFile("no grad-mode mismatch possible in this file")
        result = analyze_module(tree, self.context.filename or "<stdin>", self.config)
        plans = plans_to_apply(without_noqa(result.hits, source), self.unsafe_fixes)
        if not plans:
            raise SkipFile("nothing to fix")
        # CodemodCommand.transform_module adds/removes the scheduled imports afterwards.
        return apply_fixes(tree, plans, self.style, self.context, update_imports=False)
