"""Apply the fix plans that GM1xx findings carry, keeping everything else byte for byte.

Used by ``python -m lints.codemod`` and by the libcst codemod commands in
``codemods/``; the findings come from the same engine the linter runs.

A module is fixed whole (``fix_source``, ``apply_fixes``) or, when big, a piece of top-level statements at a
time (``fix_in_pieces``). The parts, one job each: ``fix_nodes`` (the nodes a fix names, by position),
``fix_plans`` (fixes bound to nodes, and those refused), ``fix_transform`` (the libcst transform),
``fix_with_blocks`` (a ``with`` statement unwrapped or cut, comments kept), ``fix_names`` (names and imports);
their public names are importable from here.
"""
from __future__ import annotations

import ast
import bisect
import dataclasses
import re
from typing import Collection, Iterable, Optional, Sequence, Union

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

from .fix_names import _unused_imports, _uses_name_otherwise, inference_mode_imports
from .fix_nodes import _Nodes, node_positions
from .fix_plans import REFUSED_WHY, FixPlan, plans_for
from .fix_transform import FixTransformer
from .model import Finding, Fix
from .summary import parse_quietly

__all__ = [
    "PIECE_CHARS", "PIECES_MIN_CHARS", "REFUSED_WHY", "STYLES", "FixPlan", "FixTransformer", "PiecesMisfit",
    "apply_fixes", "fix_in_pieces", "fix_source", "inference_mode_imports", "node_positions", "plans_for",
    "statement_pieces",
]

STYLES = ("remove", "no_grad")


def apply_fixes(module: cst.Module, plans: Sequence[FixPlan], style: str = "remove",
                context: Optional[CodemodContext] = None, update_imports: bool = True,
                imported_elsewhere: Optional[Collection[str]] = None, nodes: Optional[_Nodes] = None) -> cst.Module:
    """``module`` with ``plans`` applied (the module must be the one the plans were made on).

    Import changes are scheduled on ``context``; with ``update_imports`` they are
    made here too (a libcst CodemodCommand makes them itself afterwards). An inference_mode
    import is removed only where the fix left it unused, and never one that other modules may
    import from this one: ``imported_elsewhere`` names those (None: not known, so none is removed),
    and a module with ``__all__`` keeps them all.
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}")
    if not plans:
        return module
    context = context or CodemodContext()
    fixed = module.visit(FixTransformer(plans, style, context, nodes))
    if imported_elsewhere is not None:
        candidates = [(alias, source, asname) for alias, source, asname in inference_mode_imports(module)
                      if (asname or "inference_mode") not in imported_elsewhere]
        if candidates and not _uses_name_otherwise(module, "__all__"):
            unused_before = _unused_imports(module)  # the fix did not make those unused: not its business
            for alias, source, asname in candidates:
                if alias not in unused_before:
                    RemoveImportsVisitor.remove_unused_import(context, source, "inference_mode", asname)
    if not update_imports:
        return fixed
    # each visitor copies the module and (for removal) computes scopes: skip them when nothing is scheduled
    if context.scratch.get(AddImportsVisitor.CONTEXT_KEY):
        fixed = AddImportsVisitor(context).transform_module(fixed)
    if context.scratch.get(RemoveImportsVisitor.CONTEXT_KEY):
        fixed = RemoveImportsVisitor(context).transform_module(fixed)
    return fixed


def fix_source(module: cst.Module, findings: Iterable[Finding], style: str, unsafe_fixes: bool,
               context: Optional[CodemodContext] = None, unbound: Optional[list[Fix]] = None,
               refused: Optional[list[Finding]] = None, imported_elsewhere: Optional[Collection[str]] = None,
               nodes: Optional[_Nodes] = None) -> Union[cst.Module, None]:
    """Fixed module, or None when no finding had an applicable fix (see ``plans_for``, ``apply_fixes``)."""
    findings = list(findings)
    if nodes is None and any(fix.safe or unsafe_fixes for f in findings for fix in f.fixes):
        nodes = node_positions(module)  # here, not in plans_for: apply_fixes needs the same ones
    plans = plans_for(module, findings, unsafe_fixes, unbound, style, refused, nodes)
    return apply_fixes(module, plans, style, context, imported_elsewhere=imported_elsewhere, nodes=nodes) \
        if plans else None


# Big modules, a piece at a time ------------------------------------------------------------------------

# About this much source per piece; pieces are cut where a top-level `def`, `class` or decorator starts.
PIECE_CHARS = 1 << 16
# A module at least this big is fixed a piece at a time (``fix_in_pieces``): libcst's tree of a whole module
# takes about 500 bytes of memory per byte of source (3.5 GB for a 5 MB module, where the linter's peak was
# 0.4 GB), and collecting the garbage among that many live nodes made the fix superlinear.
PIECES_MIN_CHARS = 2 * PIECE_CHARS
_PIECE_START = re.compile(r"^(?:def |class |async def |@)", re.MULTILINE)


class PiecesMisfit(Exception):
    """The module cannot be fixed a piece at a time (libcst cannot parse a piece, or print it back as it
    is): fix it whole."""


@dataclasses.dataclass
class _Piece:
    first_line: int  # the file's line it starts on (1-based)
    text: str

    def module(self, to_rewrite: bool = False) -> cst.Module:
        """The piece's tree; ``to_rewrite``: one that prints the piece back as it is (the rest of the
        file is left as it is, byte for byte), else ``PiecesMisfit``."""
        try:
            module = cst.parse_module(self.text)
        except (cst.ParserSyntaxError, RecursionError) as exc:
            raise PiecesMisfit(f"line {self.first_line}: {exc}") from None
        if to_rewrite:
            self.check_exact(module)
        return module

    def check_exact(self, module: cst.Module) -> None:
        if module.code != self.text:
            raise PiecesMisfit(f"line {self.first_line}: libcst does not print the piece back as it is")

    def moved(self, fix: Fix, towards_file: bool) -> Fix:
        """``fix`` with its lines counted in the file (``towards_file``) or in this piece."""
        shift = (self.first_line - 1) * (1 if towards_file else -1)
        return dataclasses.replace(fix, at=(fix.at[0] + shift, fix.at[1]),
                                   items=tuple((line + shift, col) for line, col in fix.items))


def statement_pieces(text: str, path: str = "<unknown>", size: Optional[int] = None) -> list[_Piece]:
    """``text`` cut into pieces of whole top-level statements, of about ``size`` characters or more.

    A cut is made at a line starting with ``def``, ``class``, ``async def`` or ``@``, where the text
    before it parses (with CPython's parser, which costs a twentieth of libcst's): a line that looks
    like a start inside a string or brackets leaves the piece before it unfinished, so no cut is made
    there. The first piece reaches past the leading imports, where ``AddImportsVisitor`` adds one.
    Raises ``PiecesMisfit`` where the text does not parse at all.
    """
    size = PIECE_CHARS if size is None else size
    pieces: list[_Piece] = []
    begin, line, tried = 0, 1, 0
    for match in _PIECE_START.finditer(text):
        end = match.start()
        if end - begin < size or end - tried < size:  # tried: a misfit there; try again a piece further on
            continue
        tried = end
        try:
            tree = parse_quietly(text[begin:end], path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if not pieces and not _past_the_imports(tree):
            continue
        del tree
        pieces.append(_Piece(line, text[begin:end]))
        line += text.count("\n", begin, end)
        begin = end
    try:
        parse_quietly(text[begin:], path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise PiecesMisfit(f"does not parse from line {line}: {exc}") from None
    pieces.append(_Piece(line, text[begin:]))
    return pieces


def _past_the_imports(tree: ast.Module) -> bool:
    """Whether ``tree`` holds a statement after its leading imports (and docstring)."""
    body = tree.body
    first = body[0] if body else None
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
        first.value.value, str)
    strict = isinstance(first, ast.Assign) and any(
        isinstance(target, ast.Name) and target.id == "__strict__" for target in first.targets)
    return any(not isinstance(stmt, (ast.Import, ast.ImportFrom)) for stmt in body[1 if docstring or strict else 0:])


def _word(name: str) -> re.Pattern:
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")


def fix_in_pieces(text: str, findings: Sequence[Finding], style: str, unsafe_fixes: bool,
                  unbound: list[Fix], refused: list[Finding], imported_elsewhere: Optional[Collection[str]] = None,
                  path: str = "<unknown>", piece_chars: Optional[int] = None) -> tuple[str, Optional[str]]:
    """``fix_source`` on ``text`` (with ``apply_fixes``' import changes), one piece of top-level statements
    (``statement_pieces``) at a time, so that one piece's libcst tree is alive at a time (with the
    first piece's and those of the pieces that import ``inference_mode``, where imports may change).

    Returns (the fixed text, or ``text`` where nothing changed; why a fixed piece does not parse, or None).
    ``unbound`` gets the fixes whose position names no node (counted in the file), ``refused`` the
    findings ``plans_for`` refuses. Raises ``PiecesMisfit`` where the pieces cannot stand for the module.

    The pieces give what the whole module gives: a fix rewrites one statement, the comments an unwrapped
    block leaves are printed where they were, whichever piece holds them, and the names ``plans_for`` and
    the import changes ask about are looked up in every piece. One difference: an ``inference_mode``
    import is kept where another piece still spells the name, where the whole module's scopes could have
    shown that name to be another one (keeping an import changes nothing).
    """
    pieces = statement_pieces(text, path, piece_chars)
    firsts = [piece.first_line for piece in pieces]
    # piece -> the findings whose first applicable fix is there: (the finding moved into the piece, as given)
    to_fix_in: dict[int, list[tuple[Finding, Finding]]] = {}
    for finding in findings:
        applicable = [fix for fix in finding.fixes if fix.safe or unsafe_fixes]
        if applicable:
            index = max(bisect.bisect_right(firsts, applicable[0].at[0]) - 1, 0)
            piece = pieces[index]
            moved = dataclasses.replace(
                finding, fixes=tuple(piece.moved(fix, towards_file=False) for fix in finding.fixes))
            to_fix_in.setdefault(index, []).append((moved, finding))
    if not to_fix_in:
        return text, None

    name_uses: dict[str, bool] = {}

    def uses_name_otherwise(name: str) -> bool:
        """``_uses_name_otherwise`` of the whole module (the name spelt in a piece: that piece looked at)."""
        if name not in name_uses:
            word = _word(name)
            name_uses[name] = any(_uses_name_otherwise(piece.module(), name)
                                  for piece in pieces if word.search(piece.text))
        return name_uses[name]

    # `from torch import inference_mode` statements that the fix may leave unused (as ``apply_fixes`` does)
    candidates: list[tuple[int, str, Optional[str]]] = []  # (piece, module imported from, as-name)
    kept: dict[int, cst.Module] = {}  # the pieces whose trees the import changes need: as parsed
    if imported_elsewhere is not None:
        for index, piece in enumerate(pieces):
            if "inference_mode" in piece.text and "import" in piece.text:
                module = piece.module(to_rewrite=True)
                found = [(index, source, asname) for _alias, source, asname in inference_mode_imports(module)
                         if (asname or "inference_mode") not in imported_elsewhere]
                if found:
                    candidates.extend(found)
                    kept[index] = module
        if candidates and uses_name_otherwise("__all__"):
            candidates = []
            kept = {}
    names = {asname or "inference_mode" for _piece, _source, asname in candidates}
    spelt_before: dict[str, set[int]] = {name: set() for name in names}  # name -> pieces using it otherwise
    spelt_after: dict[str, set[int]] = {name: set() for name in names}

    context = CodemodContext()  # the imports every piece's fix needs, added to the first piece
    texts = [piece.text for piece in pieces]
    fixed_kept: dict[int, cst.Module] = {}  # the first piece's fixed tree, and those of ``kept``
    planned = False
    for index, piece in enumerate(pieces):
        spelt = [name for name in names if _word(name).search(piece.text)]
        if index not in to_fix_in and not spelt and index not in kept:
            continue
        module = kept.get(index) or piece.module()
        fixed = module
        if index in to_fix_in:
            local_unbound: list[Fix] = []
            local_refused: list[Finding] = []
            moved_here = [moved for moved, _given in to_fix_in[index]]
            nodes = node_positions(module, {line for f in moved_here for fix in f.fixes
                                            for line, _col in (fix.at, *fix.items)})
            plans = plans_for(module, moved_here, unsafe_fixes, local_unbound, style, local_refused, nodes,
                              uses_name_otherwise)
            unbound.extend(piece.moved(fix, towards_file=True) for fix in local_unbound)
            refused_here = {id(f) for f in local_refused}
            refused.extend(given for moved, given in to_fix_in[index] if id(moved) in refused_here)
            if unbound:  # the file is refused whole
                return text, None
            if plans:
                planned = True
                if index not in kept:  # those were checked when parsed
                    piece.check_exact(module)
                fixed = module.visit(FixTransformer(plans, style, context, nodes))
                texts[index] = fixed.code
        for name in spelt:
            if _uses_name_otherwise(module, name):
                spelt_before[name].add(index)
            if _uses_name_otherwise(fixed, name):
                spelt_after[name].add(index)
        if index == 0 or index in kept:
            fixed_kept[index] = fixed
    if not planned:
        return text, None
    if context.scratch.get(AddImportsVisitor.CONTEXT_KEY):  # on the tree the fix made, as the whole way does
        head = fixed_kept[0] if 0 in fixed_kept else pieces[0].module()
        if texts[0] == pieces[0].text and 0 not in kept:
            pieces[0].check_exact(head)
        fixed_kept[0] = AddImportsVisitor(context).transform_module(head)
        texts[0] = fixed_kept[0].code
    for index in sorted(kept):
        removals = CodemodContext()
        unused_before = _unused_imports(kept[index])
        wanted = {(source, asname) for at, source, asname in candidates if at == index}
        for alias, source, asname in inference_mode_imports(kept[index]):
            if (source, asname) not in wanted:
                continue
            name = asname or "inference_mode"
            # used before the fix (in this piece's scopes, or spelt in another), and spelt in no other after it
            used_before = alias not in unused_before or bool(spelt_before[name] - {index})
            if used_before and not spelt_after[name] - {index}:
                RemoveImportsVisitor.remove_unused_import(removals, source, "inference_mode", asname)
        if removals.scratch.get(RemoveImportsVisitor.CONTEXT_KEY):
            texts[index] = RemoveImportsVisitor(removals).transform_module(fixed_kept[index]).code
    for piece, new in zip(pieces, texts):
        if new != piece.text:  # Python's parser says what runs (libcst's again cost a sixth of the time)
            try:
                parse_quietly(new, path)
            except (SyntaxError, ValueError, RecursionError) as exc:
                return text, f"line {piece.first_line}: {exc}"
    return "".join(texts), None
