"""The caches are data (JSON), never code; a bad or foreign cache is a miss, never a wrong result."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys

from lints.options import Config
from lints.engine import lint_project

from .helpers import ROOT, chdir, write_package

BUGGY = {
    "engine/warm.py": (
        "import torch\n"
        "def warmup(model):\n"
        "    with torch.inference_mode():\n"
        "        model()\n"),
}


class _Marker:
    """Unpickling this writes a marker file: proof that a cache was executed."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _findings(root, config=Config(), **kwargs):
    with chdir(root):
        run = lint_project(["."], config, **kwargs)
    return sorted((f.path, f.line, f.col, f.code) for f in run.findings), run


def test_a_planted_pickle_cache_never_runs(tmp_path):
    root = write_package(tmp_path / "repo", BUGGY)
    marker = tmp_path / "ran"
    cache = root / ".gradmode_cache"
    cache.mkdir()
    payload = pickle.dumps({"x": _Marker(str(marker))})
    # every name a cache of ours has had, old pickle names included
    for name in ("summaries.json", "results.json", "0.1.0-lint-0000.pickle"):
        (cache / name).write_bytes(payload)
    found, _ = _findings(root)
    assert not marker.exists()
    assert [code for *_, code in found] == ["GM101"]
    # and through the CLI, which also reads the cache
    env = {k: v for k, v in os.environ.items() if k != "GRADMODE_CACHE_DIR"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, "-m", "lints", "."], cwd=root, capture_output=True, text=True,
                            env=env, timeout=120)
    assert not marker.exists(), result.stderr
    assert "GM101" in result.stdout


def test_a_corrupt_or_foreign_cache_changes_no_finding(tmp_path):
    root = write_package(tmp_path / "repo", BUGGY)
    clean, _ = _findings(root, use_cache=False)
    cache = root / ".gradmode_cache"
    for damage in (b"{not json", b"[]", json.dumps({"format": "someone else", "entries": {}}).encode(),
                   b"\xff\xfe\x00"):
        shutil.rmtree(cache, ignore_errors=True)
        _findings(root)  # a good cache first
        for name in ("summaries.json", "results.json"):
            (cache / name).write_bytes(damage)
        assert _findings(root)[0] == clean
    # a well-formed cache whose entry lies about the file's content is a miss, not a finding source
    shutil.rmtree(cache, ignore_errors=True)
    _findings(root)
    data = json.loads((cache / "summaries.json").read_text())
    for entry in data["entries"].values():
        entry[1]["functions"] = {}
    (cache / "summaries.json").write_text(json.dumps(data))
    (cache / "results.json").unlink()
    (root / "engine" / "warm.py").write_text(BUGGY["engine/warm.py"] + "\n")  # new content: re-summarised
    assert [code for *_, code in _findings(root)[0]] == ["GM101"]


def test_same_content_at_two_paths_with_module_globs_cold_then_warm(tmp_path):
    helper = "import torch\ndef prepare(model):\n    with torch.inference_mode():\n        model()\n"
    root = write_package(tmp_path / "repo", {"engine/warmup/prep.py": helper, "engine/serving/prep.py": helper})
    config = Config(module_globs=("*/warmup/*.py",))
    cold, _ = _findings(root, config)
    warm, run = _findings(root, config)
    assert run.analysis is None  # the second run came from the result cache
    assert cold == warm == [(os.path.join("engine", "warmup", "prep.py"), 3, 9, "GM101")]
    # another config is another result
    other, _ = _findings(root, Config())
    assert other == []


def test_a_rerun_after_an_edit_resummarises_only_that_file(tmp_path, monkeypatch):
    files = dict(BUGGY)
    for n in range(5):
        files[f"engine/other{n}.py"] = f"def f{n}():\n    return {n}\n"
    root = write_package(tmp_path / "repo", files)
    _findings(root)
    import lints.engine as engine

    summarised = []
    real = engine.summarize_source
    monkeypatch.setattr(engine, "summarize_source", lambda source, *a: summarised.append(source.path) or real(
        source, *a))
    (root / "engine" / "other3.py").write_text("def f3():\n    return 33\n")
    found, _ = _findings(root, jobs=1)
    assert summarised == [os.path.join("engine", "other3.py")]
    assert [code for *_, code in found] == ["GM101"]


def test_a_cold_run_reads_each_file_once_and_the_rerun_is_a_hit(tmp_path, monkeypatch):
    files = dict(BUGGY)
    files["engine/broken.py"] = "def f(:\n"  # a file without a summary must not spoil the hit
    root = write_package(tmp_path / "repo", files)
    modules = len(list(root.rglob("*.py")))
    import lints.engine as engine

    hashed = []
    real = engine.file_key
    monkeypatch.setattr(engine, "file_key", lambda raw: hashed.append(raw) or real(raw))
    cold, run = _findings(root, jobs=1)
    assert run.analysis is not None and len(run.errors) == 1
    assert len(hashed) == modules  # by the summariser alone: the empty cache had nothing to compare with
    hashed.clear()
    warm, run = _findings(root, jobs=1)
    assert run.analysis is None and warm == cold == [(os.path.join("engine", "warm.py"), 3, 9, "GM101")]
    assert len(run.errors) == 1 and len(hashed) == modules  # the rerun compares every file's hash


def test_with_workers_the_summaries_are_written_by_a_child_and_reused(tmp_path, monkeypatch):
    files = dict(BUGGY)
    for n in range(30):
        files[f"engine/other{n}.py"] = f"def f{n}():\n    return {n}\n"
    root = write_package(tmp_path / "repo", files)
    import lints.engine as engine

    children = []
    real = engine.in_forked_child
    monkeypatch.setattr(engine, "in_forked_child", lambda work: children.append(work) or real(work))
    cold, run = _findings(root, jobs=2)
    assert len(children) == 1 and run.analysis is not None
    saved = json.loads((root / ".gradmode_cache" / "summaries.json").read_text())
    assert len(saved["entries"]) == len(list(root.rglob("*.py")))  # complete when lint_project returned
    (root / "engine" / "other3.py").write_text("def f3():\n    return 33\n")
    summarised = []
    real_summarize = engine.summarize_source
    monkeypatch.setattr(engine, "summarize_source", lambda source, *a: summarised.append(source.path) or
                        real_summarize(source, *a))
    warm, _ = _findings(root, jobs=1)  # in-process, so the summarising is seen here
    assert summarised == [os.path.join("engine", "other3.py")]
    assert warm == cold == [(os.path.join("engine", "warm.py"), 3, 9, "GM101")]


def test_files_the_summariser_refuses_do_not_spoil_the_result_cache(tmp_path):
    root = write_package(tmp_path / "repo", dict(BUGGY))
    (root / "engine" / "binary.py").write_bytes(b"x = 1\x00\n")  # NUL byte: refused, with one error line
    (root / "engine" / "latin.py").write_bytes(b"x = '\xe9'\n")  # not UTF-8, no coding declaration
    runs = [_findings(root, jobs=jobs) for jobs in (2, 1, 2)]
    assert [run.analysis is None for _, run in runs] == [False, True, True]  # the reruns are hits
    assert all(len(run.errors) == 2 and found == runs[0][0] for found, run in runs)


def test_a_project_whose_every_file_fails_still_reuses_its_result(tmp_path):
    root = write_package(tmp_path / "repo", {"engine/broken.py": "def f(:\n"})
    (root / "engine" / "__init__.py").unlink()
    runs = [_findings(root, jobs=1) for _ in range(2)]
    assert [run.analysis is None for _, run in runs] == [False, True]


def _summarised_in(monkeypatch) -> list:
    import lints.engine as engine

    summarised: list = []
    real = engine.summarize_source
    monkeypatch.setattr(engine, "summarize_source", lambda source, *a: summarised.append(source.path) or real(
        source, *a))
    return summarised


def test_a_few_changed_files_are_written_beside_the_summaries_not_over_them(tmp_path, monkeypatch):
    files = dict(BUGGY)
    for n in range(5):
        files[f"engine/other{n}.py"] = f"def f{n}():\n    return {n}\n"
    root = write_package(tmp_path / "repo", files)
    cache = root / ".gradmode_cache"
    cold, _ = _findings(root, jobs=1)
    whole = (cache / "summaries.json").read_bytes()
    assert not (cache / "summaries-changes.json").exists()
    (root / "engine" / "other3.py").write_text("def f3():\n    return 33\n")
    _findings(root, jobs=1)
    (root / "engine" / "other4.py").unlink()
    (root / "engine" / "other1.py").write_text("def f1():\n    return 11\n")
    found, _ = _findings(root, jobs=1)
    assert (cache / "summaries.json").read_bytes() == whole  # untouched since the cold run
    changes = json.loads((cache / "summaries-changes.json").read_text())
    assert set(changes["entries"]) == {os.path.join("engine", f"other{n}.py") for n in (1, 3, 4)}
    assert changes["entries"][os.path.join("engine", "other4.py")] is None and found == cold
    # the next run reads both: nothing is summarised again
    (cache / "results.json").unlink()
    summarised = _summarised_in(monkeypatch)
    assert _findings(root, jobs=1)[0] == cold and summarised == []


def test_many_changed_files_rewrite_the_summaries(tmp_path, monkeypatch):
    import lints.engine as engine

    monkeypatch.setattr(engine.SummaryCache, "CHANGES_LIMIT", 2)
    files = dict(BUGGY)
    for n in range(5):
        files[f"engine/other{n}.py"] = f"def f{n}():\n    return {n}\n"
    root = write_package(tmp_path / "repo", files)
    cache = root / ".gradmode_cache"
    _findings(root, jobs=1)
    first_id = json.loads((cache / "summaries.json").read_text())["id"]
    (root / "engine" / "other0.py").write_text("def f0():\n    return 10\n")
    _findings(root, jobs=1)
    assert (cache / "summaries-changes.json").exists()
    for n in (1, 2):
        (root / "engine" / f"other{n}.py").write_text(f"def f{n}():\n    return {n}0\n")
    found, _ = _findings(root, jobs=2)
    saved = json.loads((cache / "summaries.json").read_text())
    assert saved["id"] != first_id and not (cache / "summaries-changes.json").exists()
    assert saved["entries"][os.path.join("engine", "other0.py")][1]["functions"]["f0"]["line"] == 1
    (cache / "results.json").unlink()
    summarised = _summarised_in(monkeypatch)
    assert _findings(root, jobs=1)[0] == found and summarised == []


def test_changes_to_another_summaries_file_are_ignored(tmp_path, monkeypatch):
    files = dict(BUGGY)
    files["engine/other.py"] = "def f():\n    return 1\n"
    root = write_package(tmp_path / "repo", files)
    cache = root / ".gradmode_cache"
    cold, _ = _findings(root, jobs=1)
    (root / "engine" / "other.py").write_text("def f():\n    return 2\n")
    _findings(root, jobs=1)
    changes = json.loads((cache / "summaries-changes.json").read_text())
    # the changes claim warm.py has no functions; they name a summaries.json that is not there
    changes["entries"][os.path.join("engine", "warm.py")] = json.loads(
        (cache / "summaries.json").read_text())["entries"][os.path.join("engine", "warm.py")]
    changes["entries"][os.path.join("engine", "warm.py")][1]["functions"] = {}
    for base, expected in (("someone else's", 1), (changes["base"], 0)):
        changes["base"] = base
        (cache / "summaries-changes.json").write_text(json.dumps(changes))
        (cache / "results.json").unlink()
        summarised = _summarised_in(monkeypatch)
        found, _ = _findings(root, jobs=1)
        # ignored: other.py is summarised again, and the finding stays; applied: the (lying) entry is used
        assert len(summarised) == expected and (found == cold) == (expected == 1)
        monkeypatch.undo()


def _project_with_others(tmp_path, count: int = 5):
    files = dict(BUGGY)
    for n in range(count):
        files[f"engine/other{n}.py"] = f"def f{n}():\n    return {n}\n"
    return write_package(tmp_path / "repo", files)


def test_a_failed_rewrite_keeps_the_changes_it_would_have_replaced(tmp_path, monkeypatch):
    import lints.engine as engine

    monkeypatch.setattr(engine.SummaryCache, "CHANGES_LIMIT", 1)
    root = _project_with_others(tmp_path)
    cache = root / ".gradmode_cache"
    cold, _ = _findings(root, jobs=1)
    (root / "engine" / "other0.py").write_text("def f0():\n    return 10\n")
    _findings(root, jobs=1)  # one change: written to summaries-changes.json
    real_write = engine.SummaryCache._write

    def full_write_fails(self, target, data):
        if target.name == "summaries.json":
            return False  # as a full disk would: `_write` warns and writes nothing
        return real_write(self, target, data)

    monkeypatch.setattr(engine.SummaryCache, "_write", full_write_fails)
    for n in (1, 2):
        (root / "engine" / f"other{n}.py").write_text(f"def f{n}():\n    return {n}0\n")
    _findings(root, jobs=1)  # three changes: a full rewrite, which fails
    assert (cache / "summaries-changes.json").exists()
    monkeypatch.setattr(engine.SummaryCache, "_write", real_write)
    (cache / "results.json").unlink()
    summarised = _summarised_in(monkeypatch)
    assert _findings(root, jobs=1)[0] == cold
    # other0's change survived in the changes file; only the two of the failed run are redone
    assert sorted(summarised) == [os.path.join("engine", f"other{n}.py") for n in (1, 2)]


def test_a_corrupt_changes_file_is_ignored(tmp_path, monkeypatch):
    root = _project_with_others(tmp_path)
    cache = root / ".gradmode_cache"
    cold, _ = _findings(root, jobs=1)
    (root / "engine" / "other0.py").write_text("def f0():\n    return 10\n")
    _findings(root, jobs=1)
    for damage in (b"{not json", b"[]", b'{"format": "x"}', b"\xff\xfe"):
        (cache / "summaries-changes.json").write_bytes(damage)
        (cache / "results.json").unlink()
        summarised = _summarised_in(monkeypatch)
        assert _findings(root, jobs=1)[0] == cold
        assert summarised == [os.path.join("engine", "other0.py")]  # its entry in summaries.json is stale
        monkeypatch.undo()


def test_a_file_removed_then_restored_is_summarised_from_the_changes(tmp_path, monkeypatch):
    root = _project_with_others(tmp_path)
    cache = root / ".gradmode_cache"
    cold, _ = _findings(root, jobs=1)
    warm = root / "engine" / "warm.py"
    warm.unlink()
    assert _findings(root, jobs=1)[0] == []
    changes = json.loads((cache / "summaries-changes.json").read_text())
    assert changes["entries"] == {os.path.join("engine", "warm.py"): None}
    warm.write_text(BUGGY["engine/warm.py"])
    assert _findings(root, jobs=1)[0] == cold
    (cache / "results.json").unlink()
    summarised = _summarised_in(monkeypatch)
    assert _findings(root, jobs=1)[0] == cold and summarised == []
