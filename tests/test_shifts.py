"""An edit that only moves code: the last run's findings are carried to the new lines, and they are the
findings a fresh analysis gives; any other edit is analysed afresh."""
from __future__ import annotations

import dataclasses
import os

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from lints.engine import lint_project
from lints.model import Finding, Fix
from lints.options import Config
from lints.summary_cache import MemorySummaries
from lints.shifts import carried, line_shift
from lints.sources import source_from_text
from lints.summary_jobs import summarize_source

from .helpers import cache_fact, chdir, write_cache_fact, write_package
from .test_bug_class import REVERSE

# Every kind of record a summary keeps a position in: defs, classes, decorators, calls, assignments,
# returns and yields, with-statements (items, enter_context), if-branches, loop and try blocks, lambdas,
# annotated class fields.
RICH = '''import contextlib
import torch


def deco(fn):
    return fn


class Runner:
    @deco
    def warmup(self, x, n=3):
        with torch.inference_mode(), contextlib.ExitStack() as stack:
            stack.enter_context(torch.no_grad())
            if self.buf is None or n > 2:
                self.buf = torch.zeros(n)
            else:
                self.buf += 1
        for i in range(n):
            try:
                self.buf[i:].fill_(0)
            except RuntimeError:
                pass
        f = lambda: torch.empty(2)
        return f()

    def gen(self):
        yield self.buf


def main():
    def inner():
        return Runner()
    inner().warmup(torch.ones(2))


class Config:
    size: int
    name: "str" = "x"

    @property
    def scale(self):
        return 1

    @scale.setter
    def scale(self, value):
        def check():
            return value
        return check()
'''


def _summary(text: str, path: str = "engine/rich.py") -> dict:
    return summarize_source(source_from_text(path, text), "engine.rich", False)


def test_every_position_of_a_summary_moves_with_a_line_added_above():
    old = _summary(RICH)
    lines = line_shift(old, _summary("# a comment\n" + RICH))
    assert lines is not None and lines and all(new == line + 1 for line, new in lines.items())
    # a blank line in the middle of a function moves only what is below it
    middle = RICH.replace("        for i in range(n):\n", "\n        for i in range(n):\n")
    lines = line_shift(old, _summary(middle))
    assert lines is not None and lines[11] == 11 and lines[18] == 19 and lines[max(lines)] == max(lines) + 1
    assert line_shift(old, _summary(RICH)) == {line: line for line in lines}  # no edit: nothing moves
    assert any("@" in qual for qual in old["functions"])  # the setter is named by its line


def test_names_with_a_line_in_them_move_only_while_their_order_holds():
    accessors = ("class C:\n    @property\n    def p(self): ...\n\n\n\n"
                 "    @p.setter\n    def p(self, v): ...\n    @p.deleter\n    def p(self): ...\n")
    old = _summary(accessors)
    assert sorted(old["functions"]) == ["<module>", "C.p", "C.p@10", "C.p@8"]
    assert line_shift(old, _summary("\n" + accessors)) is not None  # C.p@11 still sorts before C.p@9
    assert line_shift(old, _summary("\n\n" + accessors)) is None  # C.p@10 would sort before C.p@12


def _finding(path: str, line: int, message: str = "m", notes: tuple = (), fixes: tuple = ()) -> Finding:
    return Finding(path, line, 4, "GM202", message, notes=notes, fixes=fixes)


def test_carried_moves_every_place_of_the_file_and_nothing_else():
    shifts = {"a.py": {3: 4, 7: 9}}
    found = carried([_finding("a.py", 3, "at a.py:7 and xa.py:7 and a.py:77", ("called at a.py:3", "b.py:3"),
                              (Fix("unwrap_with", (3, 4), True, ((7, 8),)),)),
                     _finding("b.py", 3, "allocated at a.py:3")], "decorated at a.py:7", shifts)
    assert found is None  # a.py:77 is no place the shift knows
    (moved, other), evidence = carried(
        [_finding("a.py", 3, "at a.py:7 and xa.py:7", ("called at a.py:3", "b.py:3"),
                  (Fix("unwrap_with", (3, 4), True, ((7, 8),)),)),
         _finding("b.py", 3, "allocated at a.py:3")], "decorated at a.py:7", shifts)
    assert (moved.line, moved.message, moved.notes) == (4, "at a.py:9 and xa.py:7", ("called at a.py:4", "b.py:3"))
    assert moved.fixes == (Fix("unwrap_with", (4, 4), True, ((9, 8),)),)
    assert (other.line, other.message, evidence) == (3, "allocated at a.py:4", "decorated at a.py:9")
    assert carried([_finding("a.py", 5)], "", shifts) is None
    # line 1 is the module's own scope: it stays, unless something else there moved (then it is either)
    assert carried([_finding("b.py", 2, "module level at a.py:1")], "", shifts)[0][0].message.endswith("a.py:1")
    assert carried([_finding("b.py", 2, "at a.py:1")], "", {"a.py": {1: 2}}) is None


def _everything(run) -> list[tuple]:
    return [(*dataclasses.astuple(f)[:7], f.notes, f.fixes) for f in run.findings]


def _lint(root, **kwargs):
    with chdir(root):
        return lint_project(["."], Config(), **kwargs)


def _carried_as_fresh(root, **kwargs) -> bool:
    """Whether a run is carried (not analysed) and gives what a fresh analysis gives: findings, errors, serving mode."""
    run, fresh = _lint(root, **kwargs), _lint(root, use_cache=False, overrides=kwargs.get("overrides"))
    return run.analysis is None and (_everything(run), run.errors, run.serving) == \
        (_everything(fresh), fresh.errors, fresh.serving)


def test_an_edit_that_moves_code_carries_the_findings_a_fresh_analysis_gives(tmp_path):
    root = write_package(tmp_path / "repo", REVERSE)
    cold = _lint(root)
    assert cold.analysis is not None and {f.code for f in cold.findings} >= {"GM202", "GM106"}
    assert any("engine/workspace.py:" in note for f in cold.findings for note in f.notes)
    workspace, runner = root / "engine" / "workspace.py", root / "engine" / "runner.py"
    workspace.write_text('"""Buffers."""\n# kept across calls\n' + workspace.read_text())
    runner.write_text(runner.read_text().replace("    def capture(self, x):", "\n    # capture\n    def capture(self, x):"))
    moved = _lint(root)
    fresh = _lint(root, use_cache=False)
    assert moved.analysis is None  # carried, not analysed
    assert _everything(moved) == _everything(fresh) != _everything(cold)
    assert moved.serving == fresh.serving
    assert _lint(root).analysis is None  # and saved: the next run is a hit
    # a change the summaries see is analysed afresh
    workspace.write_text(workspace.read_text().replace("torch.zeros(n)", "torch.zeros(n + 1)"))
    changed = _lint(root)
    assert changed.analysis is not None and _everything(changed) == _everything(_lint(root, use_cache=False))


def test_a_buffer_that_moves_code_is_carried_from_the_saved_files_results(tmp_path):
    root = write_package(tmp_path / "repo", REVERSE)
    _lint(root)
    path = os.path.join("engine", "workspace.py")
    text = "# edited, not saved\n" + (root / path).read_text()
    with chdir(root):
        moved = lint_project([path], Config(), overrides={path: text})
        fresh = lint_project([path], Config(), overrides={path: text}, use_cache=False)
    assert moved.analysis is None and moved.findings and _everything(moved) == _everything(fresh)
    assert moved.findings[0].line == 8


def test_the_language_servers_cache_carries_each_edit_from_the_one_before(tmp_path):
    root = write_package(tmp_path / "repo", REVERSE)
    path = os.path.join("engine", "workspace.py")
    saved = (root / path).read_text()
    cache = MemorySummaries()
    first = _lint(root, summary_cache=cache)
    assert first.analysis is not None
    lines = []
    for version in range(1, 4):
        text = "# edit\n" * version + saved
        with chdir(root):
            run = lint_project(["."], Config(), overrides={path: text}, summary_cache=cache)
            fresh = lint_project(["."], Config(), overrides={path: text}, use_cache=False)
        assert run.analysis is None and _everything(run) == _everything(fresh)
        lines.append([f.line for f in run.findings if f.path == path])
    assert lines == [[8], [9], [10]]
    # a constant no other module mentions, in the buffer: carried too; one another module reads, or the file's own
    # class, analysed
    main = root / "engine" / "main.py"
    main.write_text("from engine.workspace import LIMIT\n" + main.read_text())
    with chdir(root):
        assert lint_project(["."], Config(), summary_cache=cache).analysis is not None
    for added, carries in (("_edit = 1\n", True), ("Workspace = 1\n", False), ("LIMIT = 4\n", False),
                           ("LIMIT = 4\n_again = 2\n", True)):  # each against the run before
        text = saved + added
        with chdir(root):
            run = lint_project(["."], Config(), overrides={path: text}, summary_cache=cache)
            fresh = lint_project(["."], Config(), overrides={path: text}, use_cache=False)
        assert (run.analysis is None) is carries and _everything(run) == _everything(fresh)
    assert not (root / ".gradmode_cache").exists()  # the server's cache is memory only


def test_the_language_servers_cache_reads_what_the_cli_left_and_never_writes_it(tmp_path, monkeypatch):
    """The server's first analysis of a project the CLI left warm is a hit, and its edits carry or are analysed
    from the folder's rows: a row only the folder holds that mentions a rebound name is no carry."""
    from lints import summary_jobs

    root = write_package(tmp_path / "repo", REVERSE)
    main = root / "engine" / "main.py"
    main.write_text("from engine.workspace import LIMIT\n" + main.read_text())
    cli = _lint(root)
    cache_file = root / ".gradmode_cache" / "cache.sqlite3"
    written = cache_file.read_bytes()
    made = []
    real = summary_jobs._summarize_job
    monkeypatch.setattr(summary_jobs, "_summarize_job", lambda *args: made.append(args) or real(*args))
    cache = MemorySummaries()
    first = _lint(root, summary_cache=cache)
    assert first.analysis is None and not made and cli.findings and _everything(first) == _everything(cli)
    assert cache.held() == 0  # a hit reads no summary
    path = os.path.join("engine", "workspace.py")
    saved = (root / path).read_text()
    for added, carries in (("_edit = 1\n", True), ("LIMIT = 4\n", False), ("LIMIT = 4\n_again = 2\n", True)):
        text = saved + added
        with chdir(root):
            run = lint_project(["."], Config(), overrides={path: text}, summary_cache=cache)
            assert not made  # the buffer is summarised as given; every other summary is the folder's
            fresh = lint_project(["."], Config(), overrides={path: text}, use_cache=False)
        made.clear()
        assert (run.analysis is None) is carries and _everything(run) == _everything(fresh)
    assert cache_file.read_bytes() == written  # read, never written
    # the analysis ran in this thread; the server's actions read the same cache from another (a fix after a hit)
    import threading

    later = MemorySummaries()
    with chdir(root):
        lint_project(["."], Config(), summary_cache=later)  # a hit: the folder open, no summary read
        from lints.summary_jobs import content_key
        key = content_key(os.path.join("engine", "main.py"))
    read = []
    reader = threading.Thread(target=lambda: read.append(later.get(os.path.join("engine", "main.py"), key)))
    reader.start()
    reader.join()
    assert read and read[0] is not None and read[0]["path"] == os.path.join("engine", "main.py")
    # the root spelt otherwise (the server's folder above the project): the rows serve, the results (whose notes
    # spell paths from the current folder) do not
    with chdir(tmp_path):
        elsewhere = lint_project([str(root)], Config(), summary_cache=MemorySummaries())
    assert elsewhere.analysis is not None and not made
    assert [(os.path.relpath(f.path, root), f.line, f.code) for f in elsewhere.findings] == \
        [(f.path, f.line, f.code) for f in cli.findings]
    assert cache_file.read_bytes() == written


def _listing(folder) -> dict:
    return {p.name: (p.is_symlink(), p.is_fifo(), p.is_file() and not p.is_symlink() and p.read_bytes())
            for p in sorted(folder.iterdir())}


def test_the_language_server_changes_nothing_in_the_cache_folder_however_it_is_planted(tmp_path):
    """The folder is the checkout's to plant: a cache file in WAL mode (SQLite would make its -wal and -shm files), a
    link in the cache file's place, a FIFO as its journal. The server reads what it can, removes, creates and writes
    nothing there, and its findings are a fresh analysis'."""
    import sqlite3

    root = write_package(tmp_path / "repo", REVERSE)
    _lint(root)
    folder = root / ".gradmode_cache"
    fresh = _everything(_lint(root, use_cache=False))
    with sqlite3.connect(folder / "cache.sqlite3") as db:
        assert db.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    db.close()
    planted = _listing(folder)
    assert _everything(_lint(root, summary_cache=MemorySummaries())) == fresh
    assert _listing(folder) == planted
    (folder / "cache.sqlite3").rename(folder / "elsewhere.sqlite3")
    (folder / "cache.sqlite3").symlink_to(folder / "elsewhere.sqlite3")
    os.mkfifo(folder / "cache.sqlite3-journal")
    planted = _listing(folder)
    assert _everything(_lint(root, summary_cache=MemorySummaries())) == fresh
    assert _listing(folder) == planted


def test_a_planted_row_whose_path_is_not_utf8_is_no_row(tmp_path):
    """A row path ``_row_path`` cannot have written (the checkout's to plant) is skipped, by the CLI and the server."""
    import contextlib
    import sqlite3

    root = write_package(tmp_path / "repo", REVERSE)
    _lint(root)
    cache_file = root / ".gradmode_cache" / "cache.sqlite3"
    with contextlib.closing(sqlite3.connect(cache_file)) as db, db:
        db.execute("INSERT INTO summaries VALUES (?, 'k', '[1,2,3,4,5,6]', ' x ', '{}')", (b"\xff.py",))
    fresh = _everything(_lint(root, use_cache=False))
    assert _everything(_lint(root, summary_cache=MemorySummaries())) == fresh
    assert _everything(_lint(root)) == fresh


def test_the_language_servers_cache_reads_the_rows_a_later_cli_run_wrote(tmp_path, monkeypatch):
    """A file saved and linted by the CLI while the server runs: the server's next run takes its summary from the
    folder (opened again once written), not from summarising it itself."""
    from lints import summary_jobs

    root = write_package(tmp_path / "repo", REVERSE)
    _lint(root)
    cache = MemorySummaries()
    assert _lint(root, summary_cache=cache).analysis is None
    main = root / "engine" / "main.py"
    main.write_text(main.read_text() + "\n\ndef helper(x):\n    return x.sum()\n")
    cli = _lint(root)  # the CLI re-summarises main.py and writes its row
    made = []
    real = summary_jobs._summarize_job
    monkeypatch.setattr(summary_jobs, "_summarize_job", lambda *args: made.append(args[0].path) or real(*args))
    path = os.path.join("engine", "workspace.py")
    text = (root / path).read_text() + "\n\ndef unsaved(x):\n    return x.sum()\n"  # no carry: analysed
    server = _lint(root, summary_cache=cache, overrides={path: text})
    assert server.analysis is not None and made == []  # main.py's new summary the folder's
    fresh = _lint(root, use_cache=False, overrides={path: text})
    assert _everything(server) == _everything(fresh)
    assert cli.findings and _everything(fresh) == _everything(cli)


def test_runs_from_a_subfolder_and_from_above_share_the_rows_of_the_root(tmp_path, monkeypatch):
    """A row is kept by the file's path from the project root, however a run spells the root (``..`` from a
    subfolder, ``repo`` from above, absolute): no such run summarises a file again, and the findings are the
    ones a fresh analysis gives, spelt from where it ran."""
    from lints import summary_jobs

    root = write_package(tmp_path / "repo", REVERSE)
    cold = _lint(root)
    made = []
    real = summary_jobs._summarize_job
    monkeypatch.setattr(summary_jobs, "_summarize_job", lambda *args: made.append(args[0].path) or real(*args))
    runner = os.path.join("engine", "runner.py")
    for where, paths in ((root / "engine", ["runner.py"]), (tmp_path, [os.path.join("repo", runner)]),
                         (tmp_path, [str(root / runner)]), (root, [runner])):
        with chdir(where):
            run = lint_project(paths, Config())
            assert not made, (where, paths)  # every summary a row's
            fresh = lint_project(paths, Config(), use_cache=False)
        made.clear()
        assert run.findings and _everything(run) == _everything(fresh)
        assert [(os.path.relpath(os.path.join(where, f.path), root), f.line) for f in run.findings] == \
            [(f.path, f.line) for f in cold.findings if f.path == runner]
    # the root's own results were replaced by the last spelling's, its own again: a hit
    assert _lint(root).analysis is None and not made


def test_every_summary_of_a_real_package_has_a_shape_known_here():
    """A field the summariser gains (one that may hold a position) must be taught to ``lints.shifts``:
    until it is, no edit is carried (a fallback that is silent, so it is checked here)."""
    from pathlib import Path

    from lints.shifts import shape_and_places
    from lints.sources import read_source

    package = Path(__file__).resolve().parent.parent / "lints"
    for path in sorted(package.rglob("*.py")):
        summary = summarize_source(read_source(str(path), 1 << 22), "lints.x", False)
        assert shape_and_places(summary) is not None, path


def test_the_language_server_collects_once_after_a_cold_run(tmp_path, monkeypatch):
    """The collector's first full pass over what a cold run leaves (8 M objects on sglang) took 3.6 s, in the
    run of the first keystroke after it: it is made before the cold run's results are published."""
    import gc

    from lints import server_workspace
    from lints.server import build_parser

    collected = []
    monkeypatch.setattr(server_workspace.gc, "collect", lambda *a: collected.append(a) or 0)
    root = write_package(tmp_path / "repo", REVERSE)
    args, caches = build_parser().parse_args([]), {}
    first = server_workspace.analyse_workspace([str(root)], {}, args, caches, 1)
    assert first.cold and collected == [()]
    again = server_workspace.analyse_workspace([str(root)], {}, args, caches, 1)
    assert not again.cold and collected == [()] and gc.isenabled()


def test_the_language_server_collects_once_the_folders_summaries_came_in(tmp_path, monkeypatch):
    """After a hit from the project's folder memory holds no summary; a fix's names then read every one from the
    folder (in the actions' thread), and the next run makes the collection the cold run would have."""
    from lints import server_workspace
    from lints.server import build_parser

    collected = []
    monkeypatch.setattr(server_workspace.gc, "collect", lambda *a: collected.append(a) or 0)
    from lints.command_line import configs_for_paths

    root = write_package(tmp_path / "repo", REVERSE)
    args, caches = build_parser().parse_args([]), {}
    with chdir(root):  # the CLI's run with the server's settings, then the server started in the project's folder
        [(config, _)], _ = configs_for_paths(args, ["."])
        lint_project(["."], config)
        first = server_workspace.analyse_workspace([str(root)], {}, args, caches, 1)
        assert not first.cold and not collected and first.findings
        first.imported()
        again = server_workspace.analyse_workspace([str(root)], {}, args, caches, 1)
        assert again.cold and collected == [()]
        last = server_workspace.analyse_workspace([str(root)], {}, args, caches, 1)
        assert not last.cold and collected == [()]


def test_a_constant_bound_or_unbound_where_nothing_mentions_its_name_moves_nothing():
    old = _summary(RICH)
    appended = _summary(RICH + "_edit = 1\n")
    assert line_shift(old, appended, lambda name: False) == {line: line for line in line_shift(old, _summary(RICH))}
    assert line_shift(appended, old, lambda name: False) is not None  # and taken away again
    assert line_shift(old, appended, lambda name: name == "_edit") is None  # another summary mentions it
    assert line_shift(old, appended) is None  # not known to be unmentioned
    # a name the module itself reads, imports or defines otherwise is mentioned by its own summary
    reads_limit = RICH.replace("n=3", "n=LIMIT")
    for before, after in ((RICH, RICH + "torch = 1\n"), (RICH, RICH + "deco = 1\n"),
                          (reads_limit, reads_limit + "LIMIT = 3\n")):
        assert line_shift(_summary(before), _summary(after), lambda name: False) is None
    assert line_shift(old, _summary(RICH + "__version__ = '1'\n"), lambda name: False) is None  # a dunder
    # a value the summary records (a call, a tuple) is no constant it drops
    assert line_shift(old, _summary(RICH + "_edit = torch.zeros(2)\n"), lambda name: False) is None


def test_a_mention_is_a_whole_word_of_the_json():
    from lints.shifts import mentions

    # an escaped character ends a word (more mentions, never fewer: `\u00e9_edit` counts)
    assert [mentions(text, "_edit") for text in ('["n","m._edit"]', '"_edit"', '"a\\n_edit"', '"\\u00e9_edit"')] \
        == [True] * 4
    assert [mentions(text, "_edit") for text in ('"post_edit_steps"', '"_edit2"', '"\\\\n_edit"')] == [False] * 3


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab_9Z \\\"\n\u00e9\u2028.x/0u"), max_size=12), max_size=6))
def test_the_words_of_a_json_text_are_its_identifiers_between_escapes(strings):
    """The bytes-translating ``words_in`` finds what the identifier pattern finds, an escape counted as a space;
    ``row_words`` holds each between spaces, and nothing else."""
    import json
    import re

    from lints.summary_cache import encode_json, row_words, words_in

    for text in (encode_json(strings), json.dumps(strings, ensure_ascii=False)):
        expected = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"\\(?:u[0-9a-fA-F]{4}|.)", " ", text)))
        assert words_in(text) == expected
        assert row_words(text).split() == sorted(expected) and row_words(text).startswith(" ")


def test_an_unmentioned_constant_appended_carries_the_findings_a_fresh_analysis_gives(tmp_path, monkeypatch):
    from lints import engine

    # a longer name holding the word is no mention of it
    # (and another module's constant of the same name is a binding, not a read)
    # (a file that cannot be parsed has no summary: no mention either)
    root = write_package(tmp_path / "repo", {**REVERSE, "engine/broken.py": "def (:\n",
                                             "engine/steps.py": "post_edit_steps = getattr(3, 'x_edit')\n_edit = 0\n"})
    cold = _lint(root)
    workspace, runner = root / "engine" / "workspace.py", root / "engine" / "runner.py"
    workspace.write_text("# moved\n" + workspace.read_text() + "_edit = 1\n")
    assert _carried_as_fresh(root)
    assert _everything(_lint(root)) != _everything(cold)  # moved a line down
    for edited in (workspace, runner):  # two files binding the same new name (a commit's edits)
        edited.write_text(edited.read_text() + "_both = 1\n")
    assert _carried_as_fresh(root)
    # a name another module reads (a `from ... import`), or that rebinds one the module imports, is analysed
    (root / "engine" / "main.py").write_text("from engine.workspace import LIMIT\n" + (root / "engine" / "main.py")
                                             .read_text())
    _lint(root)
    for edited, line in ((workspace, "LIMIT = 4\n"), (runner, "Workspace = 1\n")):
        edited.write_text(edited.read_text() + line)
        run = _lint(root)
        assert run.analysis is not None and _everything(run) == _everything(_lint(root, use_cache=False))
    # a name an installed library's summary holds may be one it reads
    monkeypatch.setattr(engine, "library_words", lambda library: ["_library_read"])
    runner.write_text(runner.read_text().replace("Workspace = 1\n", ""))
    assert _lint(root).analysis is not None  # a name its own imports mention: analysed, the words saved
    workspace.write_text(workspace.read_text() + "_library_read = 1\n")
    assert _lint(root).analysis is not None
    workspace.write_text(workspace.read_text() + "_nobody_reads = 1\n")
    assert _carried_as_fresh(root)


@pytest.mark.parametrize("with_project_words", [False, True])
def test_a_cache_row_of_another_type_that_may_mention_the_name_is_no_carry(tmp_path, with_project_words):
    """A row the checkout planted or garbled after the last run: its summary a blob holding the name, its words a blob
    without it. Read (results without the project's words), it may mention the name: analysed. Results that know the
    project's words carry without reading any row, as the file's own summary (its key unchanged) says: what a
    fresh analysis gives."""
    import sqlite3

    root = write_package(tmp_path / "repo", REVERSE)
    _lint(root)
    (database,) = (root / ".gradmode_cache").rglob("cache.sqlite3")
    if not with_project_words:
        results = cache_fact(database.parent, "results")
        assert set(results["made_of"].pop("project_words")) == {"id", "added"}
        write_cache_fact(database.parent, "results", results)
    with sqlite3.connect(database) as db:
        db.execute("UPDATE summaries SET words = x'00', "
                   "summary = CAST(summary || '_planted' AS BLOB) WHERE path = ?",
                   (b"engine/main.py",))
    workspace = root / "engine" / "workspace.py"
    workspace.write_text(workspace.read_text() + "_planted = 1\n")
    if with_project_words:
        assert _carried_as_fresh(root)
    else:
        run, fresh = _lint(root), _lint(root, use_cache=False)
        assert run.analysis is not None and _everything(run) == _everything(fresh)


def test_a_cache_row_whose_words_are_not_utf8_does_not_stop_the_carry(tmp_path):
    """The words are searched as bytes: a row whose words are not UTF-8 (only a planted file has such) and do not hold
    the name lets the carry go on, as SQLite's byte search let it; where they hold it, its summary is read (here it
    mentions the name nowhere else: carried all the same)."""
    import sqlite3

    root = write_package(tmp_path / "repo", REVERSE)
    _lint(root)
    (database,) = (root / ".gradmode_cache").rglob("cache.sqlite3")
    workspace = root / "engine" / "workspace.py"
    for words, name in ((b" \xff ", "_nobody_reads"), (b"\xff _planted ", "_planted")):
        with sqlite3.connect(database) as db:
            db.execute("UPDATE summaries SET words = CAST(? AS TEXT) WHERE path = ?", (words, b"engine/main.py"))
        workspace.write_text(workspace.read_text() + f"{name} = 1\n")
        assert _carried_as_fresh(root), words


def test_an_editors_absolute_path_shares_the_cache_of_relative_runs(tmp_path):
    """An editor names the file by its absolute path, pre-commit and the CLI by a relative one: one cache serves
    both (the same rows, the same results), and an unsaved edit that moves code is carried, not analysed."""
    from .helpers import cache_rows

    root = write_package(tmp_path / "repo", REVERSE)
    cold = _lint(root)
    (cache,) = [path.parent for path in (root / ".gradmode_cache").glob("**/cache.sqlite3")]
    rows, results = cache_rows(cache), cache_fact(cache, "results")
    workspace = root / "engine" / "workspace.py"
    with chdir(root):
        whole = lint_project([str(root)], Config())
        saved = lint_project([str(workspace)], Config(), overrides={str(workspace): workspace.read_text()})
        edited = lint_project([str(workspace)], Config(), overrides={str(workspace): "# edited\n" + workspace.read_text()})
        fresh = lint_project([str(workspace)], Config(), overrides={str(workspace): "# edited\n" + workspace.read_text()},
                             use_cache=False)
    assert whole.analysis is None and saved.analysis is None and edited.analysis is None  # a hit, a hit, a carry
    assert [(f.path, *_everything(f_run)[i][1:]) for f_run in [whole] for i, f in enumerate(f_run.findings)] == \
        [(str(root / f.path), *_everything(cold)[i][1:]) for i, f in enumerate(cold.findings)]
    assert any(f.path == str(workspace) for f in edited.findings) and _everything(edited) == _everything(fresh)
    assert cache_rows(cache) == rows and cache_fact(cache, "results") == results


def test_an_editors_absolute_buffer_of_a_file_the_walk_skips_is_the_text_analysed(tmp_path):
    """A buffer named by its absolute path for a file the project's walk does not find (in an excluded folder, or
    not saved yet) is linted as the buffer, as one named relative is."""
    root = write_package(tmp_path / "repo", REVERSE)
    _lint(root)
    (root / "gen").mkdir()
    (root / "gen" / "old.py").write_text("def nothing():\n    return 1\n")
    from .helpers import FIXTURES

    buffer = (FIXTURES / "lint" / "sglang_buggy.py").read_text()
    config = Config(exclude=("gen",))
    for name in ("gen/old.py", "gen/new.py"):
        runs = []
        for spelt in (name, str(root / name)):
            with chdir(root):
                runs.append(lint_project([spelt], config, overrides={spelt: buffer}))
        relative, absolute = runs
        expected = [("GM202", 16), ("GM202", 21), ("GM101", 41), ("GM103", 50)]
        assert [(f.path, f.code, f.line) for f in relative.findings] == [(name, *e) for e in expected]
        assert [(f.path, f.code, f.line) for f in absolute.findings] == [(str(root / name), *e) for e in expected]
        assert not relative.errors and not absolute.errors


def _project_words(root) -> str:
    """The project's words the last results name: those kept beside them and those added since."""
    import contextlib
    import sqlite3

    (database,) = (root / ".gradmode_cache").rglob("cache.sqlite3")
    named = cache_fact(database.parent, "results")["made_of"]["project_words"]
    with contextlib.closing(sqlite3.connect(database)) as db:
        kept_id = db.execute("SELECT value FROM facts WHERE name = 'project_words'").fetchone()[0]
        kept = [word for word, in db.execute("SELECT word FROM project_words")]
    assert kept_id == named["id"] and all(isinstance(word, str) and " " not in word for word in kept)
    return " " + "".join(f"{word} " for word in sorted(kept)) + named["added"].lstrip()


def test_the_projects_words_let_a_carry_of_a_new_name_read_no_row_and_stay_a_superset(tmp_path, monkeypatch):
    """The results keep every identifier of the project's rows (no number: a name sought never starts with a digit). A
    constant no row names is carried without reading a row, and joins the words; an edit analysed afresh adds its
    file's new identifiers and keeps the old ones (a superset: a word of a changed row only makes a carry read)."""
    from lints.summary_cache import SummaryCache

    root = write_package(tmp_path / "repo", REVERSE)
    _lint(root)
    words = _project_words(root)
    assert words.startswith(" ") and words.endswith(" ") and " CudaGraphRunner " in words and " main " in words
    assert not any(word[0].isdigit() for word in words.split())
    read = []
    original = SummaryCache.rows_mentioning
    monkeypatch.setattr(SummaryCache, "rows_mentioning",
                        lambda self, names: read.append(names) or original(self, names))
    workspace, runner = root / "engine" / "workspace.py", root / "engine" / "runner.py"
    workspace.write_text(workspace.read_text() + "_nobody_reads_this = 1\n")
    assert _carried_as_fresh(root) and read == []
    assert " _nobody_reads_this " in _project_words(root)
    runner.write_text(runner.read_text() + "_nobody_reads_this = 2\n")  # named in the words now: the rows are read
    assert _carried_as_fresh(root) and read == [["_nobody_reads_this"]]
    runner.write_text(runner.read_text() + "def helper_added_later():\n    return torch.zeros(3)\n")
    assert _lint(root).analysis is not None  # a new function: analysed, its file's words added
    after = _project_words(root)
    assert " helper_added_later " in after and set(words.split()) <= set(after.split())


def test_the_projects_words_are_none_where_a_row_is_of_another_key(tmp_path):
    """A row another run rewrote between this run's save and its words: not the summary analysed, so no words (a carry
    then reads the rows)."""
    from lints.summary_cache import SummaryCache

    root = write_package(tmp_path / "repo", REVERSE)
    run = _lint(root)
    with chdir(root):
        cache = SummaryCache(run.cache_folder, ".")
        keys = {path: key for path, _, key, _ in cache.last_results()["made_of"]["files"]}
        assert b"CudaGraphRunner" in cache.row_identifiers(keys)
        assert cache.row_identifiers({**keys, "engine/main.py": "0" * 32}) is None
        assert cache.row_identifiers({**keys, "engine/absent.py": keys["engine/main.py"]}) is None
        cache.close()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["_edit", "x_edit", "9_edit", "_edit9", "\\n_edit", "\\u00e9_edit", "\\\\_edit",
                                 "é_edit", ".", " ", '"', "_", "1", "a"]), max_size=8))
def test_a_words_count_agrees_with_the_words_of_a_text(parts):
    """``word_count`` (how a carry counts a name's mentions beside its binding) reads words as ``words_in`` does."""
    from lints.summary_cache import word_count, words_in

    text = "".join(parts)
    assert (word_count(text, "_edit") > 0) == ("_edit" in words_in(text))
    assert word_count('["_edit","a._edit",3_edit]', "_edit") == 3


def test_another_changed_file_that_binds_the_same_name_is_no_mention_but_one_that_reads_it_is(tmp_path):
    """Five files of one commit binding one constant each check their own other mentions; a changed file that reads the
    name (its summary unchanged in shape, both versions) mentions it."""
    root = write_package(tmp_path / "repo", {**REVERSE, "engine/reader.py": "import engine\nprint(_shared_name)\n"})
    _lint(root)
    for name in ("workspace", "runner", "main"):
        path = root / "engine" / f"{name}.py"
        path.write_text(path.read_text() + "_bound_in_three = 1\n")
    assert _carried_as_fresh(root)
    workspace, reader = root / "engine" / "workspace.py", root / "engine" / "reader.py"
    workspace.write_text(workspace.read_text() + "_shared_name = 1\n")
    reader.write_text("\n" + reader.read_text())  # moved, and read as before
    run = _lint(root)
    assert run.analysis is not None


def test_the_projects_words_take_a_row_renamed_by_a_moved_import_root(tmp_path):
    """A package above the project appears: every module is renamed (``zzpkg.proj.x``) and its row rewritten under the
    same key. The words must hold the new names (a review found them kept as they were)."""
    root = write_package(tmp_path / "zzpkg" / "proj", {
        "pyproject.toml": "", "__init__.py": "", "x.py": "from .y import helper\n", "y.py": "def helper():\n    pass\n"})
    _lint(root)
    assert " zzpkg " not in _project_words(root)
    (tmp_path / "zzpkg" / "__init__.py").write_text("")
    assert _lint(root).analysis is not None
    assert " zzpkg " in _project_words(root)


@pytest.mark.parametrize("garble", ["blob", "other_id", "added_not_text", "named_not_dict"])
def test_the_projects_words_of_another_shape_make_a_carry_read_the_rows(tmp_path, monkeypatch, garble):
    """Words kept or named otherwise than a run writes them (a checkout's to plant, a garbled file): a carry reads the
    rows as before, and gives what a fresh analysis gives."""
    import contextlib
    import sqlite3

    from lints.summary_cache import SummaryCache

    root = write_package(tmp_path / "repo", REVERSE)
    _lint(root)
    (database,) = (root / ".gradmode_cache").rglob("cache.sqlite3")
    results = cache_fact(database.parent, "results")
    named = results["made_of"]["project_words"]
    with contextlib.closing(sqlite3.connect(database)) as db, db:
        if garble == "blob":
            db.execute("UPDATE facts SET value = x'00ff' WHERE name = 'project_words'")
        elif garble == "other_id":
            db.execute("UPDATE facts SET value = 'feedface' WHERE name = 'project_words'")
    if garble in ("added_not_text", "named_not_dict"):
        results["made_of"]["project_words"] = {**named, "added": 5} if garble == "added_not_text" else [named["id"]]
        write_cache_fact(database.parent, "results", results)
    read = []
    original = SummaryCache.rows_mentioning
    monkeypatch.setattr(SummaryCache, "rows_mentioning",
                        lambda self, names: read.append(names) or original(self, names))
    workspace = root / "engine" / "workspace.py"
    workspace.write_text(workspace.read_text() + "_nobody_reads_this = 1\n")
    assert _carried_as_fresh(root) and read == [["_nobody_reads_this"]]


def test_words_added_to_words_another_run_replaced_meanwhile_are_not_named_by_their_id(tmp_path):
    """Two runs at once: one adds its new words to those it read, the other replaces them in between. The adding run's
    words (and their id) are not kept, or the id would name words the table no longer holds: a carry then reads the
    rows. Added to the words it read, they are kept."""
    from lints.summary_cache import KeptWords, SummaryCache

    folder = tmp_path / "cache"
    SummaryCache(folder).save_results("d", [], {}, [], None, KeptWords("first", {"a", "b"}))
    adding, replacing = SummaryCache(folder), SummaryCache(folder)
    assert adding.words_held("first", ["a", "new"]) == {"a"}
    replacing.save_results("d", [], {}, [], None, KeptWords("other", {"x"}))
    adding.save_results("d", [], {}, [], None, KeptWords("added", {"new"}, added_to="first"))
    assert SummaryCache(folder).words_held("added", ["a"]) is None
    assert SummaryCache(folder).words_held("other", ["a", "new", "x"]) == {"x"}
    SummaryCache(folder).save_results("d", [], {}, [], None, KeptWords("more", {"y"}, added_to="other"))
    assert SummaryCache(folder).words_held("more", ["a", "x", "y"]) == {"x", "y"}


def test_results_naming_their_files_in_a_shape_of_another_kind_are_analysed_afresh_not_a_crash(tmp_path):
    """A planted or garbled list of what the results were made of (a list where a key should be): the next analysis
    recomputes the project's words, and gives what a fresh one gives."""
    root = write_package(tmp_path / "repo", REVERSE)
    _lint(root)
    (database,) = (root / ".gradmode_cache").rglob("cache.sqlite3")
    results = cache_fact(database.parent, "results")
    results["made_of"]["files"][1][2] = [1]
    write_cache_fact(database.parent, "results", results)
    runner = root / "engine" / "runner.py"
    runner.write_text(runner.read_text() + "def helper_added_later():\n    return torch.zeros(3)\n")
    run, fresh = _lint(root), _lint(root, use_cache=False)
    assert run.analysis is not None and _everything(run) == _everything(fresh)
