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

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")

# every rule: GM201 reads the kept buffers too
EVERY_RULE = Config(extend_select=("GM201",))


def _engine(shape: str) -> dict[str, str]:
    return {path: text.replace("PRIME_MODE", BUGGY_MODE) for path, text in SHAPES[shape].items()}


def _children(monkeypatch) -> list:
    started = []
    start = forked_work.start

    def recording(find):
        pending = start(find)
        started.append(pending)
        return pending

    monkeypatch.setattr(forked_work, "start", recording)
    return started


@pytest.mark.parametrize("shape", ["kernel-object", "pool-factory"])
def test_a_forked_child_finds_what_one_process_finds(tmp_path, monkeypatch, shape):
    files = _engine(shape)
    alone = lint_run(tmp_path / "one", files, EVERY_RULE, jobs=1)
    started = _children(monkeypatch)
    forked = lint_run(tmp_path / "two", files, EVERY_RULE, jobs=2)
    assert len(started) == 2 and None not in started  # half of the call graph, then the buffers
    assert {f for f in as_set(forked.findings) if f[1] == "GM202"} == expected_in_files(files)
    assert [dataclasses.replace(f, path="") for f in forked.findings] == \
        [dataclasses.replace(f, path="") for f in alone.findings]


def test_no_child_without_a_buffer_rule_or_a_second_job(tmp_path, monkeypatch):
    files = _engine("kernel-object")
    started = _children(monkeypatch)
    lint_run(tmp_path / "one", files, EVERY_RULE, jobs=1)
    lint_run(tmp_path / "gm1", files, Config(select=("GM1",)), jobs=2)
    assert started == []


@pytest.mark.parametrize("failing", [0, 1])
def test_a_child_that_fails_leaves_the_work_to_the_parent(tmp_path, monkeypatch, failing):
    files = _engine("kernel-object")
    start = forked_work.start
    started = []

    def one_fails(work):
        started.append(work)
        if len(started) - 1 != failing:
            return start(work)

        def broken():
            raise RuntimeError("the child fails")
        return start(broken)

    monkeypatch.setattr(forked_work, "start", one_fails)
    run = lint_run(tmp_path, files, EVERY_RULE, jobs=2)
    assert len(started) == 2
    assert {f for f in as_set(run.findings) if f[1] == "GM202"} == expected_in_files(files)


def test_half_of_the_call_graph_from_a_child_is_the_graph_built_in_one_process():
    from lints.callgraph import CallGraph
    from lints.project import Project
    from lints.summary import summarize

    from .test_project import ORDER_FILES

    files = {**ORDER_FILES, **_engine("kernel-object")}

    def graph(fork: bool) -> tuple[CallGraph, Project]:
        project = Project([summarize(text, path, path[:-3].replace("/", ".").removesuffix(".__init__"),
                                     path.endswith("__init__.py")) for path, text in files.items()])
        built = CallGraph(project)
        built.build(fork=fork)
        return built, project

    def everything(built: CallGraph, project: Project) -> list:
        return [(fid, built.runs(fid), built.edges(fid), built.edges(fid, loose=True),
                 [built.call_targets(fid, i) for i in range(len(project.function(fid)["calls"]))])
                for fid in project.functions] + [sorted(built.callers().items())]

    alone, forked = graph(False), graph(True)
    mine, theirs = forked[0]._halves()
    assert mine and theirs  # both processes had modules to resolve
    assert any(forked[0].runs(fid) for fid in theirs)
    assert everything(*forked) == everything(*alone)


def test_an_unasked_child_is_ended_and_reaped():
    pending = forked_work.start(lambda: __import__("time").sleep(60))
    assert pending is not None
    forked_work.cancel(pending)
    with pytest.raises(ChildProcessError):  # reaped: no zombie left
        os.waitpid(pending.pid, os.WNOHANG)
