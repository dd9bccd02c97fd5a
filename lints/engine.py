"""Lint one source text: prefilter, parse once, index once, run the selected rule families.

Shared by the standalone CLI, the flake8 plugin and the codemod.
"""
from __future__ import annotations

import ast
import dataclasses
import re
import warnings
from typing import Optional, Union

import libcst as cst
from libcst.metadata import MetadataWrapper

from .analysis import ModuleAnalysis
from .config import Config
from .index import build_index
from .paths import text_may_have_warm_path
from .files import MAX_FILE_BYTES, SourceFile, decode_source, read_source  # noqa: F401 (public API)
from .model import FileError, Finding, RuleHit
from .rules import ALL_RULES, FAMILIES

_NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
# GM201 can only fire on a file that mentions a tensor factory.
_FACTORY_TEXT = re.compile(r"\b(?:empty|zeros|ones|full)(?:_like|_strided)?\b|_like\b|\bnew_(?:empty|zeros|ones|full|tensor)")


@dataclasses.dataclass(eq=False)
class ModuleResult:
    """Everything one analysis produced; ``analysis`` is None when the file was prefiltered out."""

    hits: list[RuleHit]
    module: Optional[cst.Module] = None
    analysis: Optional[ModuleAnalysis] = None


def might_match(text: str, config: Config, path: str = "") -> bool:
    """Cheap text prefilter: False only when no selected rule can fire on ``text``.

    GM1xx and GM202 need the grad-mode switch that differs from serving's and a
    warmup/autotune/capture path (a matching name, class or module); GM201 needs a factory.
    """
    if config.is_selected("GM201") and _FACTORY_TEXT.search(text):
        return True
    mismatched = "inference_mode" if config.serving_grad_mode == "no_grad" else "no_grad"
    return (mismatched in text and any(config.is_selected(code) for code in ALL_RULES)
            and text_may_have_warm_path(text, path, config))


def parse(path: str, text: str) -> Union[cst.Module, FileError]:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        try:  # Python's own message is the one users know
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(text, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as py_exc:
            return FileError(path, f"syntax error at line {py_exc.lineno}, column {py_exc.offset}: {py_exc.msg}")
        except (ValueError, RecursionError, MemoryError):
            pass
        return FileError(path, f"syntax error at line {exc.raw_line}, column {exc.raw_column + 1}: "
                               f"{' '.join(exc.message.split())}")
    except RecursionError:
        return FileError(path, "cannot parse: nesting too deep")


def analyze_module(module: cst.Module, path: str, config: Config) -> ModuleResult:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    analysis = ModuleAnalysis(build_index(wrapper, path), config)
    hits: list[RuleHit] = []
    for prefix, rules, check in FAMILIES:
        if any(config.is_selected(code) for code in rules):
            hits.extend(hit for hit in check(analysis) if config.is_selected(hit.code))
    hits.sort(key=lambda h: (h.line, h.col, h.code))
    return ModuleResult(hits, module, analysis)


def analyze_text(text: str, path: str, config: Config, prefilter: bool = True,
                 apply_noqa: bool = True) -> Union[ModuleResult, FileError]:
    if prefilter and not might_match(text, config, path):
        return ModuleResult([])
    module = parse(path, text)
    if isinstance(module, FileError):
        return module
    try:
        result = analyze_module(module, path, config)
    except RecursionError:
        return FileError(path, "cannot analyze: nesting too deep")
    if apply_noqa:
        result.hits = without_noqa(result.hits, text)
    return result


def without_noqa(hits: list[RuleHit], text: str) -> list[RuleHit]:
    if not hits or "noqa" not in text.lower():
        return hits
    lines = text.splitlines()
    kept = []
    for hit in hits:
        line = lines[hit.line - 1] if 0 < hit.line <= len(lines) else ""
        match = _NOQA.search(line)
        if match is None:
            kept.append(hit)
            continue
        codes = match.group("codes")
        if codes and not any(hit.code.startswith(c.upper()) for c in re.split(r"[,\s]+", codes) if c):
            kept.append(hit)
    return kept


def to_findings(path: str, hits: list[RuleHit]) -> list[Finding]:
    out = []
    for hit in hits:
        rule = ALL_RULES[hit.code]
        out.append(Finding(path, hit.line, hit.col, hit.code, hit.message, rule.severity, hit.fixable))
    return out


def lint_source(source: SourceFile, config: Config, prefilter: bool = True) -> Union[list[Finding], FileError]:
    result = analyze_text(source.text, source.path, config, prefilter=prefilter)
    if isinstance(result, FileError):
        return result
    return to_findings(source.path, result.hits)
