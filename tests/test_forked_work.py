"""Parts of the analysis done in forked children (``lints/forked_work.py``): half of the call graph, and the
kept buffers beside the grad-mode analysis. The same graph and findings as in one process, a failing child's
work redone by the parent, an unasked child ended."""
from __future__ import annotations

import dataclasses
import os

import pytest

from lints import forked_work
from lints.options import Config

from .helpers import as_set, expected_in_files, lint_run
from .test_buffer_flow import BUGGY_MODE, SHAPES

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.exists("/proc/meminfo"),
                                reason="no fork, or no /proc to tell the memory to spare (the analysis forks only on Linux)")

# every rule: GM201 reads the kept buffers too
EVERY_RULE = Config(extend_select=("GM201",))


def _engine(shape: str) -> dict[str, str]:
    return {path: text.replace("PRIME_MODE", BUGGY_MODE) for path, text in SHAPES[shape].items()}


def _children(monkeypatch) -> list:
    started = []
    converse = forked_work.converse

    def recording(first, then):
        talk = converse(first, then)
        started.append(talk)
        return talk

    monkeypatch.setattr(forked_work, "converse", recording)
    return started


@pytest.mark.parametrize("shape", ["kernel-object", "pool-factory"])
def test_a_forked_child_finds_what_one_process_finds(tmp_path, monkeypatch, shape):
    files = _engine(shape)
    alone = lint_run(tmp_path / "one", files, EVERY_RULE, jobs=1)
    started = _children(monkeypatch)
    forked = lint_run(tmp_path / "two", files, EVERY_RULE, jobs=2)
    assert len(started) == 1 and started[0] is not None  # the child ran
    assert {f for f in as_set(forked.findings) if f[1] == "GM202"} == expected_in_files(files)
    assert [dataclasses.replace(f, path="") for f in forked.findings] == \
        [dataclasses.replace(f, path="") for f in alone.findings]


def test_no_child_without_a_buffer_rule_or_a_second_job(tmp_path, monkeypatch):
    files = _engine("kernel-object")
    started = _children(monkeypatch)
    lint_run(tmp_path / "one", files, EVERY_RULE, jobs=1)
    lint_run(tmp_path / "gm1", files, Config(select=("GM1",)), jobs=2)
    assert started == []


@pytest.mark.parametrize("failing", ["first", "then"])
def test_a_child_that_fails_leaves_the_work_to_the_parent(tmp_path, monkeypatch, failing):
    files = _engine("kernel-object")
    converse = forked_work.converse
    started = []

    def broken():
        raise RuntimeError("the child fails")

    def one_fails(first, then):
        started.append(failing)
        if failing == "first":
            return converse(broken, then)
        return converse(first, lambda rows: broken())

    monkeypatch.setattr(forked_work, "converse", one_fails)
    run = lint_run(tmp_path, files, EVERY_RULE, jobs=2)
    assert started == [failing]
    assert {f for f in as_set(run.findings) if f[1] == "GM202"} == expected_in_files(files)


def test_an_unasked_child_is_ended_and_reaped():
    import time

    talk = forked_work.converse(lambda: time.sleep(60), lambda message: None)
    assert talk is not None
    forked_work.end(talk)
    with pytest.raises(ChildProcessError):  # reaped: no zombie left
        os.waitpid(talk.pid, os.WNOHANG)


def test_half_of_the_call_graph_from_a_child_is_the_graph_built_in_one_process():
    from lints.callgraph import CallGraph
    from lints.project import Project
    from lints.summary import summarize

    from .test_project import ORDER_FILES

    files = {**ORDER_FILES, **_engine("kernel-object")}

    def project() -> Project:
        return Project([summarize(text, path, path[:-3].replace("/", ".").removesuffix(".__init__"),
                                  path.endswith("__init__.py")) for path, text in files.items()])

    def everything(built: CallGraph, project: Project) -> list:
        return [(fid, built.runs(fid), built.edges(fid), built.edges(fid, loose=True),
                 [built.call_targets(fid, i) for i in range(len(project.function(fid)["calls"]))])
                for fid in project.functions] + [sorted(built.callers().items())]

    alone = CallGraph(project())
    assert alone.build() is None
    forked = CallGraph(project())
    # the child sends what it finds with the whole graph: here its callers index, to compare with ours
    talk = forked.build(then=lambda: sorted((k, [tuple(e) for e in v]) for k, v in forked.callers().items()))
    assert talk is not None
    mine, theirs = forked._halves()
    assert mine and theirs  # both processes had modules to resolve
    assert any(forked.runs(fid) for fid in theirs)
    assert everything(forked, forked.project) == everything(alone, alone.project)
    as_tuples = lambda data: [(k, [tuple(e) for e in v]) for k, v in data]  # noqa: E731 - JSON gives lists
    assert forked_work.last_answer(talk, as_tuples) == sorted((k, [tuple(e) for e in v]) for k, v in alone.callers().items())


def test_a_failure_in_the_parent_leaves_no_child(monkeypatch):
    from lints.callgraph import CallGraph
    from lints.project import Project
    from lints.summary import summarize

    started = _children(monkeypatch)

    def interrupted(*_args):
        raise RuntimeError("Ctrl-C, or a bug of ours, while the child works")

    monkeypatch.setattr(forked_work, "first_answer", interrupted)
    files = _engine("kernel-object")
    graph = CallGraph(Project([summarize(text, path, path[:-3].replace("/", "."), False)
                               for path, text in files.items()]))
    with pytest.raises(RuntimeError):
        graph.build(then=lambda: None)
    assert len(started) == 1 and started[0] is not None
    with pytest.raises(ChildProcessError):  # ended and reaped
        os.waitpid(started[0].pid, os.WNOHANG)


def test_no_child_without_memory_to_spare(tmp_path, monkeypatch):
    """The child comes to copy most of the parent's pages: with less memory available than the process holds,
    the analysis stays in one process (and finds the same)."""
    files = _engine("kernel-object")
    started = _children(monkeypatch)
    real_open = open

    def low_memory(path, *args, **kwargs):
        if path == "/proc/meminfo":
            import io
            return io.BytesIO(b"MemTotal: 1000 kB\nMemAvailable: 1 kB\n")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", low_memory)
    assert not forked_work.can_fork(2)
    run = lint_run(tmp_path, files, EVERY_RULE, jobs=2)
    assert started == []
    assert {f for f in as_set(run.findings) if f[1] == "GM202"} == expected_in_files(files)


def test_kept_buffers_travel_as_json_and_come_back_equal(tmp_path):
    import json

    from lints.kept_buffers import kept_buffers_from_json
    from lints.summary_cache import encode_json

    run = lint_run(tmp_path, _engine("kernel-object"), EVERY_RULE, jobs=1)
    kept = run.analysis.kept_buffers
    assert kept.allocations and kept.updated
    assert kept_buffers_from_json(json.loads(encode_json(kept))) == kept
    with pytest.raises((TypeError, ValueError)):  # another shape is refused, not taken for buffers
        kept_buffers_from_json({"allocations": []})


def test_a_message_of_another_shape_is_refused_and_the_child_ended():
    from lints.callgraph import _rows_of

    for sent in ({"not": "rows"}, [[["callee", 0, 1]]], [[], []]):  # a dict; an edge of 3 fields; 2 rows for 1
        talk = forked_work.converse(lambda: sent, lambda message: None)
        assert talk is not None
        assert forked_work.first_answer(talk, _rows_of(1), lambda: []) is None
        with pytest.raises(ChildProcessError):  # ended and reaped: the parent finds those edges itself
            os.waitpid(talk.pid, os.WNOHANG)
