"""``python -m lints.codemod``: rewrite what the GM1xx rules report.

Exit status: 0 nothing left to report; 1 findings remain after fixing (or, with
``--check``, a file would change); 2 usage error or a file that could not be
read, parsed or written (it is left byte-identical).
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import difflib
import functools
import json
import os
import signal
import sys
import threading
import warnings
from pathlib import Path
from typing import Callable, Collection, Iterable, Optional, Sequence

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import ImportAssignment, MetadataWrapper, ScopeProvider

from . import __version__
from .cli import (EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, add_config_options, configs_for_paths,
                  errors_of, internal_error, program_name, tolerant_output)
from .options import Config, ConfigError, default_cache_dir
from .engine import ProjectRun, analyse, lint_project, project_files
from .gc_pause import collector_paused
from .globs import within
from .loose_files import loose_entries
from .sources import MAX_FILE_BYTES, SourceFile, read_source, source_lines, text_reader
from .summary_cache import SummaryCache, encode_json
from .summary_jobs import collect_summaries, summarize_source
from .walk import walks_shared
from .warn import quiet_warnings, warn
from .workers import default_jobs, run_jobs
from .writes import FileChangedError, is_read_only, remove_in_flight_temps, write_file
from .fixer import (PIECES_MIN_CHARS, REFUSED_WHY, STYLES, FixTransformer, PiecesMisfit, fix_in_pieces, fix_source,
                    inference_mode_imports, node_positions, plans_for)
from .limits import source_limits_error
from .progress import Progress
from .model import FileError, Finding
from .noqa import without_suppressed
from .output import render_text


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
    (``fix_edits``): parsing and locating nodes again per finding made ``--format json`` quadratic."""

    module: Optional[cst.Module] = None
    nodes: object = None  # ``fixer.node_positions(module)``
    error: Optional[str] = None
    # ``fix_edits`` fixing one statement at a time: each top-level statement's text and the lines
    # before it ([] where libcst does not give the text back as it is)
    tops: Optional[list[tuple[int, str]]] = None
    import_reads: Optional[dict[str, int]] = None  # ``_import_reads``
    # the text was fixed a piece at a time, each piece checked, and libcst gave back the rest as it is
    kept_exactly: bool = False


def _parse_for_fixing(source: SourceFile, parsed: Optional[ParsedSource]) -> ParsedSource:
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
        parsed = _parse_for_fixing(source, parsed)
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
    why = why or (None if checked else _does_not_parse(text, source.path))
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


def _does_not_parse(text: str, path: str) -> Optional[str]:
    """Why ``text`` does not parse for libcst or for Python; None when it does."""
    try:
        cst.parse_module(text)
        with warnings.catch_warnings():  # the user's own `\d` escapes are not our business here
            warnings.simplefilter("ignore")
            ast.parse(text, filename=path)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError) as exc:
        return str(exc)
    return None


def file_identity(path: str) -> tuple:
    """The same for every path of one file (``a.py`` and ``./a.py``, a symlink and its target, hard links)."""
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    return st.st_dev, st.st_ino


def run_to_fix_from(run: ProjectRun, config: Config, analyse_afresh: Callable[[], ProjectRun], jobs: int = 1,
                    max_bytes: int = MAX_FILE_BYTES) -> ProjectRun:
    """``run`` with findings a cache cannot have steered, for the fixes to write: the caches are the
    checkout's, and a ``results.json`` or a summary planted in them (their keys are hashes of public
    bytes) would otherwise choose which code is rewritten.

    Where the findings to fix came from ``results.json``, they are made again from the summaries; the
    summary of each file to fix is made again from its text, and where one differs from the summary the
    analysis used, no cache is trusted: ``analyse_afresh`` runs the project with none (and a warning says
    so). The summaries of the files not written are the cache's, by the hash of their content. A run
    with nothing to fix, or that used no cache, is returned as it is (nothing is written from a cache).
    """
    if run.cache_folder is None or not any(f.fixes for f in run.findings):
        return run
    if run.analysis is None:
        run = _analysed_again(run, config, jobs, max_bytes)
    if _summaries_hold(run, {f.path for f in run.findings if f.fixes}, max_bytes):
        return run
    warn(f"the cache in {run.cache_folder} does not match the files it describes: fixing from a fresh analysis")
    return analyse_afresh()


def _analysed_again(run: ProjectRun, config: Config, jobs: int, max_bytes: int) -> ProjectRun:
    """``run`` (its findings read from ``results.json``) with the analysis, and the findings of the rules
    that fix (GM1xx), made again from the summaries (the cache's, by the hash of each file's content) and
    reported as ``lint_project`` does. The other findings are the cache's, for the report, with no fix
    (GM2xx findings are reported, not rewritten: their rules, half the analysis' time on sglang, are not
    run again)."""
    from .rules import ALL_RULES

    with collector_paused():
        analysis = analyse(_summaries_again(run, config, jobs, max_bytes), config)
        found = sorted({f for code, rule in ALL_RULES.items() if code.startswith(FIXING_RULES)
                        and config.is_selected(code, rule.DEFAULT_ENABLED) for f in rule().check(analysis)})
    given = {os.path.abspath(p): p for p in run.files}
    findings = [dataclasses.replace(f, path=given[os.path.abspath(f.path)]) for f in found
                if os.path.abspath(f.path) in given]
    findings = without_suppressed([f for f in findings if not config.ignored_in(f.path, f.code)], text_reader({}))
    reported = [dataclasses.replace(f, fixes=(), fixable="") for f in run.findings
                if not f.code.startswith(FIXING_RULES)]
    return dataclasses.replace(run, findings=sorted(findings + reported), analysis=analysis)


# The rules whose findings carry fixes (GM2xx findings are reported, not rewritten).
FIXING_RULES = "GM1"


def _summaries_again(run: ProjectRun, config: Config, jobs: int, max_bytes: int) -> dict[str, dict]:
    """path -> summary of each module of ``run``'s project (whose findings came from ``results.json``): from
    its cache, by the hash of each file's content, or made again. The cache is read, never written."""
    entries = loose_entries(run.loose_members, run.loose_folder, {}, max_bytes) if run.loose_members is not None \
        else project_files(run.root, config, run.files, max_bytes=max_bytes)
    cache = SummaryCache(run.cache_folder)
    cache.limit_to_sources(sum(_size(entry.path) for entry in entries))  # as ``lint_project`` reads it
    with collector_paused():
        return collect_summaries(entries, jobs, cache, max_bytes)[0]


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):
        return 0


def _summaries_hold(run: ProjectRun, paths: Collection[str], max_bytes: int) -> bool:
    """Whether the summary ``run``'s analysis has of each of ``paths`` is the one its text gives now."""
    used: dict[str, dict] = {}
    for summary in run.analysis.project.modules.values():
        used.setdefault(os.path.abspath(summary["path"]), summary)
    for path in paths:
        summary = used.get(os.path.abspath(path))
        source = read_source(path, max_bytes)
        if summary is None or isinstance(source, FileError):
            return False  # a finding in a file the analysis has no summary of, or one that cannot be read
        module = summary["module"].partition("#")[0]  # ``Project`` names a second module of one name `m#2`
        fresh = summarize_source(dataclasses.replace(source, path=summary["path"]), module, summary["package"])
        if isinstance(fresh, FileError) or _as_json(fresh) != _as_json({**summary, "module": module}):
            return False
    return True


def _as_json(summary: dict):
    """A summary as the cache holds it (lists for tuples), to compare one made here with a cached one."""
    return json.loads(encode_json(summary))


def names_imported_elsewhere(run, config: Config, jobs: int = 1, max_bytes: int = MAX_FILE_BYTES) -> dict:
    """``file_identity`` -> the names other modules of ``run``'s project import from that file's module, or None
    where they may use any (an ``__init__.py``; a module imported whole or with ``*``): a fix keeps those imports."""
    summaries: Iterable[dict]
    if not run.whole_project:  # who imports the files is not known, so every import stays
        return {}
    if run.analysis is not None:
        summaries = run.analysis.project.modules.values()
    else:  # the findings came from the results cache; the summaries are cached too
        summaries = _summaries_again(run, config, jobs, max_bytes).values()
    try:
        with collector_paused():  # sets over every import beside millions of live summary objects
            return _imported_names(list(summaries))
    except (KeyError, TypeError, AttributeError, ValueError):  # a cached summary garbled (the cache is the checkout's)
        return {}  # not known: every import stays


def names_imported_across(runs: Sequence[tuple], jobs: int = 1, max_bytes: int = MAX_FILE_BYTES) -> dict:
    """``names_imported_elsewhere`` of several (run, config) pairs, merged by file."""
    imported: dict = {}
    for run, config in runs:
        for identity, names in names_imported_elsewhere(run, config, jobs, max_bytes).items():
            held = imported.get(identity, frozenset())
            imported[identity] = None if names is None or held is None else names | held
    return imported


def _imported_names(summaries: list[dict]) -> dict:
    children: dict[str, set[tuple[str, str]]] = {}  # dotted name -> (name under it, importing module)
    whole: dict[str, set[str]] = {}  # module or package bound by an import -> the importing modules
    for summary in summaries:
        importer = summary["module"]
        for fn in summary["functions"].values():
            for full in fn["imports"].values():
                parts = full.split(".")
                whole.setdefault(full, set()).add(importer)
                for i in range(1, len(parts)):
                    children.setdefault(".".join(parts[:i]), set()).add((parts[i], importer))
        for source in summary["star"]:
            whole.setdefault(source, set()).add(importer)
    out: dict = {}
    for summary in summaries:
        module = summary["module"]
        parts = module.split(".")
        # `import a.b` binds `a`: every module under it may be reached as an attribute
        reached = summary["package"] or any(whole.get(".".join(parts[:i]), set()) - {module}
                                            for i in range(1, len(parts) + 1))
        identity = file_identity(summary["path"])
        if reached or (identity in out and out[identity] is None):
            out[identity] = None
        else:
            names = {name for name, importer in children.get(module, ()) if importer != module}
            out[identity] = frozenset(names | out.get(identity, frozenset()))
    return out


def fix_file(path: str, options: FixOptions) -> FixOutcome:
    source = read_source(path, options.max_bytes)
    if isinstance(source, FileError):
        return FixOutcome(path, error=source.message)
    refused: list[Finding] = []
    parsed = ParsedSource()
    try:
        fixed, remaining, error = fix_text(source, options, parsed, refused=refused)
        if error is None and fixed is not None and not parsed.kept_exactly:
            fixed, error = _keep_unrelated_bytes(source.text, fixed, source.path,
                                                 parsed.module.code if parsed.module is not None else None)
    except Exception as exc:  # one bad file must not stop the run
        if _SIGNALLED:
            raise _SignalExit(128 + _SIGNALLED[0]) from None
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


def _keep_unrelated_bytes(original: str, fixed: str, path: str, roundtrip: Optional[str] = None
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
        fixed, error = _keep_unrelated_bytes(source.text, fixed, source.path, parsed.module.code)
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
    parsed = _parse_for_fixing(source, parsed)
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
    if _does_not_parse(after, source.path) is not None:  # as ``fix_text`` checks the whole file
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=program_name("lints.codemod"),
        description="Rewrite GM1xx findings (inference_mode in warmup/autotune/capture paths). "
                    "GM2xx findings are reported, not rewritten.",
        epilog="Exit status: 0 nothing left to report, 1 findings remain (or --check: files would change), "
               "2 usage error or unreadable/unparsable/unwritable file (left unchanged).",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any file would change")
    parser.add_argument("--diff", action="store_true",
                        help="print a unified diff (writes nothing; exit 1 if any file would change)")
    parser.add_argument("--style", choices=STYLES, default="remove",
                        help="remove: drop the inference_mode wrapper (upstream fix); no_grad: use torch.no_grad()")
    parser.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes marked unsafe")
    parser.add_argument("--fix-only", action="store_true",
                        help="say nothing of the findings left and do not exit 1 for them (as ruff's --fix-only)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no remaining findings or summary")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="default .gradmode_cache in the project root (or $GRADMODE_CACHE_DIR)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument("--version", action="version", version=f"gradmode-fix {__version__}")
    add_config_options(parser)
    return parser


def first_path_per_file(paths: Iterable[str], base: str = "") -> dict[tuple, str]:
    """``file_identity`` -> the first of ``paths`` naming that file (relative ones taken from ``base``).
    A file is fixed once, under that path: fixed twice, the second fix would apply the first's
    positions to its result."""
    first: dict[tuple, str] = {}
    for path in paths:
        first.setdefault(file_identity(os.path.join(base, path)), path)
    return first


def _one_path_per_file(files: list[str], by_path: dict[str, list[Finding]]
                       ) -> tuple[list[str], dict[str, list[Finding]]]:
    """Each file once (``first_path_per_file``), with the findings of all its paths (one text: the
    same positions)."""
    first = first_path_per_file(files)
    merged: dict[str, list[Finding]] = {}
    for path in dict.fromkeys(files):
        merged.setdefault(first[file_identity(path)], []).extend(by_path.get(path, ()))
    return list(first.values()), merged


def _linked_out_of_the_project(paths: Iterable[str], runs: Sequence[ProjectRun], given: Sequence[str]
                               ) -> dict[str, str]:
    """path -> why it is not fixed, for each of ``paths`` that a walk found and that is a file outside its
    project (a symbolic link there, or in a folder on the way): a checkout can link a file of its to any
    file its user may write. A file named on the command line is the user's to fix, wherever it is."""
    named = {file_identity(path) for path in given if not os.path.isdir(path)}
    root_of = {path: run.root for run in runs for path in run.files}
    out = {}
    for path in paths:
        real = os.path.realpath(path)
        if (path in root_of and not within(real, os.path.realpath(root_of[path]))
                and file_identity(path) not in named):
            out[path] = (f"reached through a symbolic link, the file is {real}, outside the project: not written "
                         f"(name it on the command line to fix it)")
    return out


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


def _crashed(path: str, why: str) -> FixOutcome:
    return FixOutcome(path, error=f"internal error: {why}; file left unchanged")


def _exit_on_signal(signum, frame) -> None:
    """SIGTERM/SIGINT/SIGHUP: remove the temp file being written (writes defer these signals, so
    there is none in practice) and exit 128+signal; workers are stopped by ``run_jobs``."""
    remove_in_flight_temps()
    _SIGNALLED.append(signum)
    raise _SignalExit(128 + signum)


# Signals taken so far: an exit raised inside library code can come out as another exception (libcst's
# context managers turn it into a KeyError); ``fix_file`` checks this before calling anything a file's fault.
_SIGNALLED: list[int] = []


class _SignalExit(SystemExit):
    """The exit a signal asks for (SIGTERM/SIGINT/SIGHUP), told apart from other exits."""


@contextlib.contextmanager
def _signals_exit_cleanly():
    """Install ``_exit_on_signal`` for the duration of a run (main thread only); restore afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None or signal.getsignal(signum) is signal.SIG_IGN:  # nohup, `cmd &`: leave ignored
            continue
        try:
            previous[signum] = signal.signal(signum, _exit_on_signal)
        except (OSError, ValueError):
            pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: Optional[Sequence[str]] = None, tool: str = "gradmode-fix") -> int:
    """``tool`` signs the lines it prints (`gradmode-lint --fix` runs it as its own)."""
    tolerant_output()
    # a fix rewrites files but creates or removes none: one walk of each folder serves the whole run
    with _signals_exit_cleanly(), walks_shared():
        try:
            return _main(argv, tool)
        except Exception:  # noqa: BLE001 - files already written are whole (write_file); the rest stay as they were
            return internal_error(tool)
        except _SignalExit as exc:
            # the workers are stopped and the temp file removed; skip the interpreter's exit hooks, which
            # would try to wake the stopped pool's threads and print a traceback
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(exc.code)


def _main(argv: Optional[Sequence[str]], tool: str = "gradmode-fix") -> int:
    args = build_parser().parse_args(argv)
    quiet_warnings(args.quiet)
    args.paths = args.paths or ["."]  # as ruff and flake8: the current folder
    try:
        groups, config_errors = configs_for_paths(args, list(args.paths))
    except ConfigError as exc:
        for each in errors_of(exc):
            print(f"{tool}: error: {each}", file=sys.stderr)
        return EXIT_ERROR
    jobs = args.jobs if args.jobs and args.jobs > 0 else default_jobs()

    def lint_all(progress=None, runs=None):
        """Each project with its own config; the whole project decides what is a finding (``runs``: gets the runs)."""
        runs = runs if runs is not None else []
        runs.extend(lint_project(members, config, jobs, cache_dir=args.cache_dir or default_cache_dir(),
                                 use_cache=not args.no_cache, max_bytes=args.max_file_size,
                                 progress=progress) for config, members in groups)
        return ([f for r in runs for f in r.findings], [f for r in runs for f in r.files],
                [e for r in runs for e in r.errors])

    runs = []
    lint_all(Progress(f"{tool}: reading"), runs)
    # the caches are the checkout's: what they say does not choose what is written
    runs = [run_to_fix_from(run, config, functools.partial(
        lint_project, members, config, jobs, use_cache=False, max_bytes=args.max_file_size), jobs, args.max_file_size)
        for run, (config, members) in zip(runs, groups)]
    found, files = [f for r in runs for f in r.findings], [f for r in runs for f in r.files]
    errors = config_errors + [e for r in runs for e in r.errors]
    by_path: dict[str, list[Finding]] = {}
    for finding in found:
        by_path.setdefault(finding.path, []).append(finding)
    broken = {e.path for e in errors}
    files, by_path = _one_path_per_file([f for f in files if f not in broken], by_path)
    imported = names_imported_across([(run, config) for run, (config, _) in zip(runs, groups)], jobs,
                                     args.max_file_size) if any(f.fixes for f in found) else None
    options = FixOptions(groups[0][0], args.style, args.unsafe_fixes, write=not (args.check or args.diff),
                         diff=args.diff, max_bytes=args.max_file_size, findings=by_path, imported=imported)
    # a file without findings has nothing to fix: it is not read again (handing each file of a large
    # tree to the workers, with the options, took 6 s on sglang 0.5.15)
    to_fix = [f for f in files if by_path.get(f)]
    outside = _linked_out_of_the_project(to_fix, runs, args.paths)
    to_fix = [f for f in to_fix if f not in outside]
    del runs  # their analyses: the fixes, and the lint after them, take the memory instead
    progress = Progress(f"{tool}: fixing")
    progress.start(len(to_fix))
    try:
        outcomes = run_jobs(functools.partial(fix_file, options=options), to_fix, jobs, progress.advance,
                            on_crash=_crashed)
    finally:
        progress.close()
    outcomes = [FixOutcome(path, remaining=tuple(by_path[path]), error=why) for path, why in outside.items()] + outcomes
    remaining = sorted(f for o in outcomes for f in o.remaining)
    changed = [o for o in outcomes if o.changed]
    if changed and options.write:  # what is left, on the whole project as it is now
        remaining = lint_all()[0]
    for outcome in outcomes:
        if outcome.diff:
            sys.stdout.flush()  # the file's own bytes: not through the text layer's encoding
            sys.stdout.buffer.write(outcome.diff)
            sys.stdout.buffer.flush()
    if not args.quiet and remaining and not args.fix_only:
        # with --diff, stdout is the patch alone (for `git apply`): the findings left go beside it
        (sys.stderr if args.diff else sys.stdout).write(render_text(remaining))
    for outcome in outcomes if not args.quiet else ():  # the linter called them fixable: say why not
        for f in outcome.refused:
            # named by its message: the lines above it may have moved with the other fixes
            print(f"{f.path}: {f.code} {f.message}: not fixed: {REFUSED_WHY}", file=sys.stderr)
    failures = [str(e) for e in errors] + [f"{o.path}: error: {o.error}" for o in outcomes if o.error]
    for line in failures:
        print(line, file=sys.stderr)
    if not args.quiet:
        verb = "would change" if not options.write else "changed"
        print(f"{tool}: {len(files)} file(s) scanned, {len(changed)} {verb}, "
              f"{len(failures)} skipped with errors, {len(remaining)} finding(s) left", file=sys.stderr)
    if failures:
        return EXIT_ERROR
    if not options.write and changed:  # --check / --diff: the findings are still in the files
        return EXIT_FINDINGS
    return EXIT_FINDINGS if remaining and not args.fix_only else EXIT_CLEAN


if __name__ == "__main__":
    sys.exit(main())
