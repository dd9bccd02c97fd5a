"""One finding's fix as the edits an editor applies (``--format json`` and SARIF): from the top-level
statements it rewrites alone where that gives the same text, else from fixing the whole file."""
from __future__ import annotations

import dataclasses
import difflib
from typing import Collection, Optional, Sequence

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import ImportAssignment, MetadataWrapper, ScopeProvider

from .file_fixes import FixOptions, ParsedSource, does_not_parse, fix_text, keep_unrelated_bytes, parse_for_fixing
from .fix_inputs import file_identity
from .fixer import FixTransformer, inference_mode_imports, node_positions, plans_for
from .model import Finding
from .sources import SourceFile, source_lines


def fix_edits(source: SourceFile, finding: Finding, options: FixOptions,
              parsed: Optional[ParsedSource] = None) -> list[dict]:
    """The edits that apply ``finding``'s fix alone to ``source`` as it is now (an editor applies one
    fix, then lints again), as 1-based rows and columns, end exclusive; [] if it cannot be applied.
    ``parsed``: the same ``ParsedSource`` for every finding of one text (parsed once, not per finding)."""
    alone = dataclasses.replace(options, unsafe_fixes=True, findings={source.path: [finding]})
    parsed = parsed if parsed is not None else ParsedSource()
    in_place = _statement_edits(source, finding, alone, parsed)
    if in_place is not None:
        return in_place
    fixed, _, error = fix_text(source, alone, parsed)
    if error is None and fixed is not None:
        fixed, error = keep_unrelated_bytes(source.text, fixed, source.path, parsed.module.code)
    if error is not None or fixed is None:
        return []
    return _line_edits(source_lines(source.text), source_lines(fixed))


def _line_edits(before: list[str], after: list[str], first_row: int = 1) -> list[dict]:
    """Edits turning the lines ``before`` into ``after`` (``before`` starting at row ``first_row``), as
    1-based rows and columns, end exclusive."""
    def start_of(index: int) -> dict:
        if index == len(before) and before and not before[-1].endswith(("\n", "\r")):
            return {"row": first_row + index - 1, "column": len(before[-1]) + 1}  # after a last line with no end
        return {"row": first_row + index, "column": 1}

    return [{"location": start_of(i1), "end_location": start_of(i2), "content": "".join(after[j1:j2])}
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
            if tag != "equal"]


def _statement_edits(source: SourceFile, finding: Finding, options: FixOptions,
                     parsed: ParsedSource) -> Optional[list[dict]]:
    """``fix_edits`` for a fix that rewrites top-level statements of the module and nothing else, from
    those statements alone: the fix rebuilds only them (``FixTransformer`` keeps every other one as
    it is), and only they are printed, checked and compared. Rewriting, printing and re-parsing the
    whole file for each finding made ``--format json`` quadratic: 250 findings in one file took 37 s.
    None where this does not hold (an import to add or remove, a comment moved to the module's end,
    text libcst does not give back as it is): then the whole file is fixed."""
    if not finding.fixes:
        return []
    parsed = parse_for_fixing(source, parsed)
    if parsed.error is not None:
        return None
    module = parsed.module
    if parsed.nodes is None:
        parsed.nodes = node_positions(module)
    if parsed.tops is None:
        parsed.tops = _top_statements(module, source.text)
    if not parsed.tops:
        return None
    unbound: list = []
    refused: list = []
    plans = plans_for(module, [finding], True, unbound, options.style, refused, parsed.nodes)
    if unbound or refused or not plans:
        return None
    imported = options.imported.get(file_identity(source.path)) if options.imported else None
    if imported is not None and not _imports_stay(module, parsed, plans, imported):
        return None
    context = CodemodContext()
    fixed = module.visit(FixTransformer(plans, options.style, context, parsed.nodes))
    if (context.scratch.get(AddImportsVisitor.CONTEXT_KEY) or context.scratch.get(RemoveImportsVisitor.CONTEXT_KEY)
            or not _same_nodes(fixed.header, module.header) or not _same_nodes(fixed.footer, module.footer)):
        return None
    old, new = module.body, fixed.body
    first = 0
    while first < min(len(old), len(new)) and old[first] is new[first]:
        first += 1
    kept_after = 0
    while kept_after < min(len(old), len(new)) - first and old[-1 - kept_after] is new[-1 - kept_after]:
        kept_after += 1
    if first == len(old) and len(old) == len(new):
        return []  # nothing changed
    end = len(old) - kept_after
    if end == len(old):  # the last statement: how the file ends (a newline or not) is the whole file's
        return None
    start_line = parsed.tops[first][0]
    before = "".join(text for _, text in parsed.tops[first:end])
    after = "".join(module.code_for_node(stmt) for stmt in new[first:len(new) - kept_after])
    if before == after:
        return []
    if does_not_parse(after, source.path) is not None:  # as ``fix_text`` checks the whole file
        return None
    return _line_edits(source_lines(before), source_lines(after), start_line + 1)


def _same_nodes(new: Sequence[cst.CSTNode], old: Sequence[cst.CSTNode]) -> bool:
    return len(new) == len(old) and all(a is b for a, b in zip(new, old))


def _top_statements(module: cst.Module, text: str) -> list[tuple[int, str]]:
    """(lines before, text) of each top-level statement; [] unless printing them one by one gives
    ``text`` back exactly (libcst drops some form feeds and CR-only line ends)."""
    header = "".join(module.code_for_node(line) for line in module.header)
    out, chars, lines = [], len(header), len(source_lines(header))
    for n, stmt in enumerate(module.body):
        code = module.code_for_node(stmt)
        if n + 1 < len(module.body) and not code.endswith(("\n", "\r")):
            return []
        if text[chars:chars + len(code)] != code:
            if n + 1 == len(module.body) and text[chars:] == code.rstrip("\r\n"):
                code = text[chars:]  # the file's last line has no line end (never rewritten here)
            else:
                return []
        out.append((lines, code))
        chars += len(code)
        lines += len(source_lines(code))
    return out if module.code == text else []


def _imports_stay(module: cst.Module, parsed: ParsedSource, plans: list, imported: Collection[str]) -> bool:
    """Whether no ``from torch import inference_mode`` can become unused by ``plans`` alone (else
    ``apply_fixes`` may remove it, which only the whole-file way does): each such import is read more
    often than the plans could take away (its reads, as libcst's scope analysis counts them, once per
    file: an attribute, keyword or parameter of that name is no read of it)."""
    candidates = [asname or "inference_mode" for _alias, _source, asname in inference_mode_imports(module)
                  if (asname or "inference_mode") not in imported]
    if not candidates:
        return True
    if parsed.import_reads is None:
        parsed.import_reads = _import_reads(module)
    rewritten = sum(len(plan.items) or 1 for plan in plans)
    return all(parsed.import_reads.get(name, 0) > rewritten for name in candidates)


def _import_reads(module: cst.Module) -> dict[str, int]:
    """name -> how many times the module reads an import of that name (any scope)."""
    scopes = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    reads: dict[str, int] = {}
    for scope in set(scopes.values()):
        if scope is None:
            continue
        for assignment in scope.assignments:
            if isinstance(assignment, ImportAssignment) or (
                    isinstance(getattr(assignment, "node", None), (cst.Import, cst.ImportFrom))):
                reads[assignment.name] = reads.get(assignment.name, 0) + len(assignment.references)
    return reads
