"""Fixing one file: its findings' fixes applied to its text (whole, or a piece at a time for a big
module), checked to parse, the bytes libcst does not keep put back, and written whole (or shown as a diff)."""
from __future__ import annotations

import ast
import dataclasses
import difflib
import os
import warnings
from typing import Collection, Optional

import libcst as cst

from .engine import lint_project
from .fix_inputs import file_identity, names_imported_elsewhere
from .fixer import PIECES_MIN_CHARS, PiecesMisfit, fix_in_pieces, fix_source, node_positions
from .limits import source_limits_error
from .model import FileError, Finding
from .options import Config
from .signal_exit import SIGNALLED, SignalExit
from .sources import SourceFile, read_source, source_lines
from .writes import FileChangedError, is_read_only, write_file


@dataclasses.dataclass(frozen=True)
class FixOptions:
    config: Config
    style: str = "remove"
    unsafe_fixes: bool = False
    write: bool = True
    diff: bool = False
    max_bytes: int = 4 * 1024 * 1024
    # path -> the project run's findings there; None: analyse the project around each file on its own
    findings: Optional[dict] = None
    # with ``findings``: ``names_imported_elsewhere`` of the project run; None: not known, so no import is removed
    imported: Optional[dict] = None


@dataclasses.dataclass(frozen=True)
class FixOutcome:
    path: str
    changed: bool = False
    diff: bytes = b""  # ``unified_diff``
    remaining: tuple[Finding, ...] = ()
    error: Optional[str] = None
    refused: tuple[Finding, ...] = ()  # fixable, but the module uses a name the fix would write


@dataclasses.dataclass
class ParsedSource:
    """A file's text parsed once for fixing, shared by the fixes of its findings one at a time
    (``editor_fixes.fix_edits``): parsing and locating nodes again per finding made ``--format json`` quadratic."""

    module: Optional[cst.Module] = None
    nodes: object = None  # ``fixer.node_positions(module)``
    error: Optional[str] = None
    # ``editor_fixes.fix_edits`` fixing one statement at a time: each top-level statement's text and the lines
    # before it ([] where libcst does not give the text back as it is)
    tops: Optional[list[tuple[int, str]]] = None
    import_reads: Optional[dict[str, int]] = None  # ``editor_fixes._import_reads``
    # the text was fixed a piece at a time, each piece checked, and libcst gave back the rest as it is
    kept_exactly: bool = False


def parse_for_fixing(source: SourceFile, parsed: Optional[ParsedSource]) -> ParsedSource:
    if parsed is not None and (parsed.module is not None or parsed.error is not None):
        return parsed
    parsed = parsed or ParsedSource()
    parsed.error = source_limits_error(source.text)  # libcst would take minutes over it, or crash
    if parsed.error is None:
        try:
            parsed.module = cst.parse_module(source.text)
        except cst.ParserSyntaxError as exc:
            parsed.error = f"cannot parse for fixing: {' '.join(exc.message.split())}"
        except RecursionError:
            parsed.error = "cannot parse for fixing: expressions nested too deeply"
    return parsed


def fix_text(source: SourceFile, options: FixOptions, parsed: Optional[ParsedSource] = None,
             refused: Optional[list[Finding]] = None) -> tuple[Optional[str], list[Finding], Optional[str]]:
    """(new text or None, findings the fix leaves, error). Pure: writes nothing. ``refused`` gets the
    findings whose fix was not applied because the module uses a name it would write (``plans_for``).

    The findings come from the whole-project run (``options.findings``); the text is parsed with
    libcst only when one of them has a fix to apply (into ``parsed``, when given, for the next call
    on the same text). The findings left are re-checked by the caller on the whole project once
    every file is fixed.
    """
    if options.findings is None:
        run = lint_project([source.path], options.config, overrides={source.path: source.text}, use_cache=False,
                           alone=True)
        findings = list(run.findings)
        imported: Optional[dict] = names_imported_elsewhere(run, options.config)
    else:
        findings = list(options.findings.get(source.path, ()))
        imported = options.imported
    applicable = [f for f in findings if f.fixes and (f.fixable == "safe" or options.unsafe_fixes)]
    if not applicable:
        return None, findings, None
    unbound: list = []
    refused = refused if refused is not None else []
    imported_here = imported.get(file_identity(source.path)) if imported else None
    fixed = _fixed_in_pieces(source, applicable, options, parsed, unbound, refused, imported_here)
    checked = fixed is not None  # each fixed piece is
    if fixed is None:  # the whole module at once
        parsed = parse_for_fixing(source, parsed)
        if parsed.error is not None:
            return None, [], parsed.error
        module = parsed.module
        if parsed.nodes is None:
            parsed.nodes = node_positions(module)
        fixed_module = fix_source(module, applicable, options.style, options.unsafe_fixes, unbound=unbound,
                                  refused=refused, imported_elsewhere=imported_here, nodes=parsed.nodes)
        fixed = (fixed_module.code, None) if fixed_module is not None else (source.text, None)
    if unbound:  # libcst and the analysis disagree on where the code is: refuse rather than guess
        line = unbound[0].at[0]
        lines = source_lines(source.text)
        text_line = lines[line - 1] if 0 < line <= len(lines) else ""
        why = " (a form feed on that line moves columns)" if "\f" in text_line else ""
        return None, [], f"line {line}: the code to fix is not where the analysis found it{why}; file left unchanged"
    text, why = fixed
    if text == source.text:
        return None, findings, None
    # Never hand back code that does not parse, whatever went wrong above.
    why = why or (None if checked else does_not_parse(text, source.path))
    if why is not None:
        return None, [], f"internal error: the fix produced code that does not parse ({why}); file left unchanged"
    fixed_ones = set(applicable).difference(refused)  # sets: thousands of findings in one file
    remaining = [f for f in findings if f not in fixed_ones]
    return text, remaining, None


def _fixed_in_pieces(source: SourceFile, applicable: list[Finding], options: FixOptions,
                     parsed: Optional[ParsedSource], unbound: list, refused: list[Finding],
                     imported_here: Optional[Collection[str]]) -> Optional[tuple[str, Optional[str]]]:
    """``fixer.fix_in_pieces`` on a big text, not parsed whole yet: (the fixed text, why it does not
    parse or None); None where the text is small, or cannot be fixed a piece at a time (a form feed or
    a CR line end, which libcst does not print back as they are, or a piece libcst cannot parse).
    Each fixed piece is checked to parse and the others are the file's own text: ``parsed.kept_exactly``."""
    text = source.text
    if (len(text) < PIECES_MIN_CHARS or "\r" in text or "\f" in text
            or (parsed is not None and (parsed.module is not None or parsed.error is not None))):
        return None
    if source_limits_error(text) is not None:
        return None  # the whole way reports it
    before = (len(unbound), len(refused))
    try:
        fixed = fix_in_pieces(text, applicable, options.style, options.unsafe_fixes, unbound, refused,
                              imported_elsewhere=imported_here, path=source.path)
    except PiecesMisfit:
        del unbound[before[0]:], refused[before[1]:]
        return None
    if parsed is not None:
        parsed.kept_exactly = True
    return fixed


def does_not_parse(text: str, path: str) -> Optional[str]:
    """Why ``text`` does not parse for libcst or for Python; None when it does."""
    try:
        cst.parse_module(text)
        with warnings.catch_warnings():  # the user's own `\d` escapes are not our business here
            warnings.simplefilter("ignore")
            ast.parse(text, filename=path)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError) as exc:
        return str(exc)
    return None


def fix_file(path: str, options: FixOptions) -> FixOutcome:
    source = read_source(path, options.max_bytes)
    if isinstance(source, FileError):
        return FixOutcome(path, error=source.message)
    refused: list[Finding] = []
    parsed = ParsedSource()
    try:
        fixed, remaining, error = fix_text(source, options, parsed, refused=refused)
        if error is None and fixed is not None and not parsed.kept_exactly:
            fixed, error = keep_unrelated_bytes(source.text, fixed, source.path,
                                                parsed.module.code if parsed.module is not None else None)
    except Exception as exc:  # one bad file must not stop the run
        if SIGNALLED:
            raise SignalExit(128 + SIGNALLED[0]) from None
        if os.environ.get("GRADMODE_DEBUG"):
            import traceback

            traceback.print_exc()
        return FixOutcome(path, error=f"internal error while fixing: {type(exc).__name__}: {exc}; file left unchanged")
    if error is not None:
        return FixOutcome(path, error=error)
    if fixed is None:
        return FixOutcome(path, remaining=tuple(remaining), refused=tuple(refused))
    # not written: every finding of the file is still there
    unfixed = tuple(options.findings.get(path, ())) if options.findings is not None else ()
    try:
        data = fixed.encode(source.encoding)
    except (UnicodeEncodeError, LookupError) as exc:
        return FixOutcome(path, remaining=unfixed,
                          error=f"cannot encode the fix as {source.encoding}: {exc}; file left unchanged")
    diff = unified_diff(source.raw, data, path) if options.diff else b""
    if options.write:
        if is_read_only(path):
            return FixOutcome(path, diff=diff, remaining=unfixed,
                              error="read-only file: fixes available but not written")
        try:
            write_file(path, data, expected=source.raw)
        except FileChangedError as exc:
            return FixOutcome(path, remaining=unfixed, error=f"not written: {exc.strerror}; file left as it is now")
        except OSError as exc:
            return FixOutcome(path, remaining=unfixed,
                              error=f"cannot write: {exc.strerror or exc}; file left unchanged")
    return FixOutcome(path, changed=True, diff=diff, remaining=tuple(remaining), refused=tuple(refused))


def keep_unrelated_bytes(original: str, fixed: str, path: str, roundtrip: Optional[str] = None
                         ) -> tuple[Optional[str], Optional[str]]:
    """``fixed`` with the bytes libcst could not represent put back; or (None, error).

    libcst does not reproduce every file byte for byte: it drops a form feed that starts a line
    of code and the last CR of a file with CR-only line ends. Everything libcst dropped outside
    the lines the fix rewrote is put back; if it dropped something inside them, the file is refused.
    """
    if roundtrip is None:
        roundtrip = cst.parse_module(original).code
    if roundtrip == original:
        return fixed, None
    before, libcst_lines, after = source_lines(original), source_lines(roundtrip), source_lines(fixed)
    lossy = [i for i, (a, b) in enumerate(zip(before, libcst_lines)) if a != b]
    refusal = (f"cannot fix without changing bytes the fix does not touch: libcst does not keep line "
               f"{(lossy or [len(libcst_lines)])[0] + 1} exactly (a form feed or a CR line end); file left unchanged")
    if len(before) != len(libcst_lines):
        return None, refusal
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, libcst_lines, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend(before[i1:i2])
        elif any(i1 <= i < i2 for i in lossy):
            return None, refusal
        else:
            out.extend(after[j1:j2])
    patched = "".join(out)
    try:  # the patched text must be the fixed program, exactly, for libcst and for Python
        same = cst.parse_module(patched).code == fixed
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            same = same and ast.dump(ast.parse(patched, path)) == ast.dump(ast.parse(fixed, path))
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError):
        same = False
    return (patched, None) if same else (None, refusal)


def unified_diff(before: bytes, after: bytes, path: str) -> bytes:
    """A file's change as ``git diff`` shows it, so that ``git apply`` and ``patch`` take it: of the
    file's own bytes (a BOM, latin-1 text as they are), lines ended by ``\\n`` only, and a last line
    without one marked ``\\ No newline at end of file``."""
    out = []
    for line in difflib.diff_bytes(difflib.unified_diff, _byte_lines(before), _byte_lines(after),
                                   os.fsencode(_diff_label("a", path)), os.fsencode(_diff_label("b", path))):
        out.append(line)
        if not line.endswith(b"\n"):
            out.append(b"\n\\ No newline at end of file\n")
    return b"".join(out)


def _byte_lines(data: bytes) -> list[bytes]:
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def _diff_label(side: str, path) -> str:
    """git-style ``a/rel/path`` for relative paths, relative to the cwd and normalised (``./pkg/x.py``
    and ``pkg//x.py`` are ``a/pkg/x.py``) so that ``git apply`` and ``patch -p1`` take the diff; a path
    outside the cwd (``../x.py``) or given absolute is shown absolute, for ``patch -p0``. A path through
    a symbolic link names the file the fix writes (both tools refuse to patch through a link)."""
    target = os.path.realpath(path)
    if not os.path.isabs(path):
        relative = os.path.relpath(target)
        if relative != ".." and not relative.startswith(".." + os.sep):
            return f"{side}/{relative.replace(os.sep, '/')}"
    return target
