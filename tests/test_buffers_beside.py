"""The kept buffers found in a forked child beside the grad-mode analysis (``lints/buffers_beside.py``): the
same findings as in one process, a failing child's work redone by the parent, an unasked child ended."""
from __future__ import annotations

import dataclasses
import os

import pytest

from lints import buffers_beside
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
    start = buffers_beside.start

    def recording(find):
        pending = start(find)
        started.append(pending)
        return pending

    monkeypatch.setattr(buffers_beside, "start", recording)
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


def test_a_child_that_fails_leaves_the_work_to_the_parent(tmp_path, monkeypatch):
    files = _engine("kernel-object")
    start = buffers_beside.start

    def failing(find):
        def broken():
            raise RuntimeError("the child fails")
        return start(broken)

    monkeypatch.setattr(buffers_beside, "start", failing)
    run = lint_run(tmp_path, files, EVERY_RULE, jobs=2)
    assert {f for f in as_set(run.findings) if f[1] == "GM202"} == expected_in_files(files)


def test_an_unasked_child_is_ended_and_reaped():
    pending = buffers_beside.start(lambda: __import__("time").sleep(60))
    assert pending is not None
    buffers_beside.cancel(pending)
    with pytest.raises(ChildProcessError):  # reaped: no zombie left
        os.waitpid(pending.pid, os.WNOHANG)
