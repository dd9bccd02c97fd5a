"""The caches are data (SQLite rows of JSON), never code; a bad or foreign cache is a miss, never a wrong result."""
from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest

from lints.options import Config
from lints.engine import lint_project

from .helpers import (ROOT, cache_fact, cache_rows, chdir, run_module, write_cache_fact, write_cache_rows,
                      write_package)

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
    for name in ("cache.sqlite3", "summaries.json", "results.json", "0.1.0-lint-0000.pickle"):
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


def _foreign_databases(path) -> None:
    """Write at ``path`` each SQLite file a checkout may plant: other tables, our tables with a trigger or a
    view beside them, another format."""
    import sqlite3

    from lints.summary_cache import _INDEXES, _TABLES, CACHE_FORMAT

    ours = [*_TABLES.values(), *_INDEXES.values()]
    plants = [["CREATE TABLE results (x)"],
              [*ours, "CREATE TRIGGER t AFTER INSERT ON summaries BEGIN DELETE FROM facts; END"],
              [*ours, "CREATE VIEW v AS SELECT * FROM summaries"],
              [*ours, "INSERT INTO facts VALUES ('format', 'gradmode-summaries/other')"],
              [*ours, f"INSERT INTO facts VALUES ('format', '{CACHE_FORMAT}')",
               "INSERT INTO summaries VALUES ('engine/warm.py', 5, 7, x'00', x'00')"]]
    for statements in plants:
        path.unlink(missing_ok=True)
        with sqlite3.connect(path) as db:
            for statement in statements:
                db.execute(statement)
        db.close()
        yield statements


def test_a_corrupt_or_foreign_cache_changes_no_finding(tmp_path):
    root = write_package(tmp_path / "repo", BUGGY)
    clean, _ = _findings(root, use_cache=False)
    cache = root / ".gradmode_cache"
    for damage in (b"{not json", b"[]", b"SQLite format 3\x00" + b"\xff" * 200, b"\xff\xfe\x00"):
        shutil.rmtree(cache, ignore_errors=True)
        _findings(root)  # a good cache first
        (cache / "cache.sqlite3").write_bytes(damage)
        assert _findings(root)[0] == clean
        assert cache_fact(cache, "results") is not None  # replaced by a cache of ours
    for planted in _foreign_databases(cache / "cache.sqlite3"):
        found, run = _findings(root)
        assert found == clean and run.analysis is not None, planted
        assert _findings(root)[1].analysis is None, planted  # replaced by a cache of ours, which serves
    # a well-formed cache whose entry lies about the file's content is a miss, not a finding source
    shutil.rmtree(cache, ignore_errors=True)
    _findings(root)
    rows = cache_rows(cache)
    for entry in rows.values():
        entry[1]["functions"] = {}
    write_cache_rows(cache, rows)
    write_cache_fact(cache, "results", None)
    (root / "engine" / "warm.py").write_text(BUGGY["engine/warm.py"] + "\nx = 1\n")  # new content: re-summarised
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
    from lints import summary_jobs

    summarised = []
    real = summary_jobs.summarize_source
    monkeypatch.setattr(summary_jobs, "summarize_source", lambda source, *a: summarised.append(source.path) or real(
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
    from lints import summary_jobs

    hashed = []
    real = summary_jobs.file_key
    monkeypatch.setattr(summary_jobs, "file_key", lambda raw: hashed.append(raw) or real(raw))
    cold, run = _findings(root, jobs=1)
    assert run.analysis is not None and len(run.errors) == 1
    assert len(hashed) == modules  # by the summariser alone: the empty cache had nothing to compare with
    hashed.clear()
    warm, run = _findings(root, jobs=1)
    assert run.analysis is None and warm == cold == [(os.path.join("engine", "warm.py"), 3, 9, "GM101")]
    assert len(run.errors) == 1 and len(hashed) == modules  # the rerun compares every file's hash


def test_with_workers_the_summaries_are_written_and_reused(tmp_path, monkeypatch):
    files = dict(BUGGY)
    for n in range(30):
        files[f"engine/other{n}.py"] = f"def f{n}():\n    return {n}\n"
    root = write_package(tmp_path / "repo", files)
    from lints import summary_jobs

    cold, run = _findings(root, jobs=2)
    assert run.analysis is not None
    assert len(cache_rows(root / ".gradmode_cache")) == len(list(root.rglob("*.py")))
    (root / "engine" / "other3.py").write_text("def f3():\n    return 33\n")
    summarised = []
    real_summarize = summary_jobs.summarize_source
    monkeypatch.setattr(summary_jobs, "summarize_source", lambda source, *a: summarised.append(source.path) or
                        real_summarize(source, *a))
    warm, _ = _findings(root, jobs=1)  # in-process, so the summarising is seen here
    assert summarised == [os.path.join("engine", "other3.py")]
    assert warm == cold == [(os.path.join("engine", "warm.py"), 3, 9, "GM101")]


def test_summaries_from_workers_are_written_as_the_json_they_came_in(tmp_path, monkeypatch):
    files = dict(BUGGY)
    for n in range(30):
        files[f"engine/other{n}.py"] = f"def f{n}(x):\n    return x.add_({n})\n"
    root = write_package(tmp_path / "repo", files)
    from lints import summary_cache, summary_jobs

    monkeypatch.setattr(summary_jobs, "PARALLEL_MIN_BYTES", 0)  # workers, small as the package is
    encoded = []
    real = summary_cache.encode_json
    monkeypatch.setattr(summary_cache, "encode_json", lambda data: encoded.append(data) or real(data))
    cold, run = _findings(root, jobs=2)
    # the workers encoded every summary: none is encoded again to be written
    assert not [data for data in encoded if isinstance(data, dict) and "functions" in data]
    with_workers = cache_rows(root / ".gradmode_cache")
    assert sorted(with_workers) == sorted(run.analysis.project.modules[m]["path"] for m in run.analysis.project.modules)
    shutil.rmtree(root / ".gradmode_cache")
    in_process, _ = _findings(root, jobs=1)
    alone = cache_rows(root / ".gradmode_cache")
    assert with_workers == alone and in_process == cold == [(os.path.join("engine", "warm.py"), 3, 9, "GM101")]
    (root / "engine" / "other3.py").write_text("def f3():\n    return 33\n")
    warm, _ = _findings(root, jobs=2)  # the other summaries come from the rows the workers' text made
    assert warm == cold


def test_a_cache_that_cannot_be_written_with_workers_is_a_warning(tmp_path, monkeypatch, capsys):
    files = {**BUGGY, **{f"engine/other{n}.py": f"y = {n}\n" for n in range(5)}}
    root = write_package(tmp_path / "repo", files)
    from lints import summary_jobs

    monkeypatch.setattr(summary_jobs, "PARALLEL_MIN_BYTES", 0)
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache folder would be\n")  # unwritable, even by root
    found, _ = _findings(root, jobs=2, cache_dir=cache)
    assert found == [(os.path.join("engine", "warm.py"), 3, 9, "GM101")]
    assert "warning: cannot write cache" in capsys.readouterr().err


def _with_and_without_workers(root, monkeypatch) -> list:
    """Findings of cold runs in process and with workers, then of a warm run on the workers' cache."""
    from lints import summary_jobs

    monkeypatch.setattr(summary_jobs, "PARALLEL_MIN_BYTES", 0)
    runs = []
    for jobs in (1, 2):
        shutil.rmtree(root / ".gradmode_cache", ignore_errors=True)
        runs.append(_findings(root, jobs=jobs)[0])
    (root / "engine" / "other.py").write_text("y = 2\n")  # the rest comes from the summaries cache
    runs.append(_findings(root, jobs=2)[0])
    return runs


def test_a_constant_json_cannot_hold_is_linted_and_cached_with_and_without_workers(tmp_path, monkeypatch):
    # an int of over 4300 digits cannot be written as JSON: it stopped every run that wrote the cache
    files = {**BUGGY, "engine/big.py": "def g():\n    return 0x" + "f" * 3600 + "\n", "engine/other.py": "y = 1\n"}
    root = write_package(tmp_path / "repo", files)
    cold, with_workers, warm = _with_and_without_workers(root, monkeypatch)
    assert cold == with_workers == warm == [(os.path.join("engine", "warm.py"), 3, 9, "GM101")]
    assert os.path.join("engine", "big.py") in cache_rows(root / ".gradmode_cache")


def test_an_escaped_surrogate_pair_names_no_function_with_or_without_workers(tmp_path, monkeypatch):
    # JSON reads the escaped pair back as one character, the name of a function here: getattr with
    # the two surrogates finds no such attribute, so no path may call it warm
    files = {"engine/__init__.py": "",
             "engine/m.py": "from engine import h\ndef warmup(model):\n    getattr(h, '\\ud800\\udc00')(model)\n",
             "engine/h.py": "import torch\ndef \U00010000(model):\n    with torch.inference_mode():\n        model()\n",
             "engine/other.py": "y = 1\n"}
    root = write_package(tmp_path / "repo", files)
    assert _with_and_without_workers(root, monkeypatch) == [[], [], []]


def test_a_summary_json_cannot_hold_is_handed_back_whole_and_not_cached(tmp_path, monkeypatch, capsys):
    from lints import summary_cache, summary_jobs

    files = {**BUGGY, "engine/deep.py": "def g():\n    return 1\n", "engine/other.py": "y = 1\n"}
    root = write_package(tmp_path / "repo", files)
    real = summary_cache.encode_json

    def refuse_deep(data):  # as JSON refuses a summary nested too deeply
        summary = data[1] if isinstance(data, list) else data
        if isinstance(summary, dict) and str(summary.get("path", "")).endswith("deep.py"):
            raise RecursionError("maximum recursion depth exceeded while encoding a JSON object")
        return real(data)

    for module in (summary_cache, summary_jobs):  # the cache writes it, a worker hands summaries back in it
        monkeypatch.setattr(module, "encode_json", refuse_deep)
    cold, with_workers, warm = _with_and_without_workers(root, monkeypatch)
    assert cold == with_workers == warm == [(os.path.join("engine", "warm.py"), 3, 9, "GM101")]
    assert "warning: cannot write cache" in capsys.readouterr().err
    assert sorted(cache_rows(root / ".gradmode_cache")) == sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py") if p.name != "deep.py")


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
    from lints import summary_jobs

    summarised: list = []
    real = summary_jobs.summarize_source
    monkeypatch.setattr(summary_jobs, "summarize_source", lambda source, *a: summarised.append(source.path) or real(
        source, *a))
    return summarised


def test_a_rerun_writes_only_the_rows_of_the_files_that_changed(tmp_path, monkeypatch):
    from lints import summary_cache

    files = dict(BUGGY)
    for n in range(5):
        files[f"engine/other{n}.py"] = f"def f{n}():\n    return {n}\n"
    root = write_package(tmp_path / "repo", files)
    cache = root / ".gradmode_cache"
    cold, _ = _findings(root, jobs=1)
    written = []
    real = summary_cache.SummaryCache._store
    monkeypatch.setattr(summary_cache.SummaryCache, "_store",
                        lambda self, statements: written.extend(statements) or real(self, statements))
    (root / "engine" / "other4.py").unlink()
    (root / "engine" / "other1.py").write_text("def f1():\n    return 11\n")
    found, _ = _findings(root, jobs=1)
    summaries = [(query.split()[0], args[0].decode()) for query, args in written if "summaries" in query]
    assert sorted(summaries) == [("DELETE", os.path.join("engine", "other4.py")),
                                 ("INSERT", os.path.join("engine", "other1.py"))]
    assert found == cold and len(cache_rows(cache)) == len(list(root.rglob("*.py")))
    # the next run reads them: nothing is summarised again
    write_cache_fact(cache, "results", None)
    summarised = _summarised_in(monkeypatch)
    assert _findings(root, jobs=1)[0] == cold and summarised == []


def _project_with_others(tmp_path, count: int = 5):
    files = dict(BUGGY)
    for n in range(count):
        files[f"engine/other{n}.py"] = f"def f{n}():\n    return {n}\n"
    return write_package(tmp_path / "repo", files)


def test_a_cache_another_run_holds_is_a_warning_and_stays_as_it_was(tmp_path, monkeypatch, capsys):
    import sqlite3

    from lints import summary_cache

    monkeypatch.setattr(summary_cache, "BUSY_SECONDS", 0.1)
    root = _project_with_others(tmp_path)
    cache = root / ".gradmode_cache"
    cold, _ = _findings(root, jobs=1)
    before = cache_rows(cache)
    holder = sqlite3.connect(cache / "cache.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another run writing, for longer than this one waits
    try:
        for n in (1, 2):
            (root / "engine" / f"other{n}.py").write_text(f"def f{n}():\n    return {n}0\n")
        assert _findings(root, jobs=1)[0] == cold
        assert "warning: cannot write cache" in capsys.readouterr().err
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert cache_rows(cache) == before
    summarised = _summarised_in(monkeypatch)
    assert _findings(root, jobs=1)[0] == cold
    assert sorted(summarised) == [os.path.join("engine", f"other{n}.py") for n in (1, 2)]


@pytest.mark.parametrize("suffix", ["-journal", "-wal", "-shm"])
def test_a_link_beside_the_cache_file_is_not_written_through(tmp_path, suffix):
    """SQLite writes a journal beside its file: one the checkout links elsewhere is removed, not followed."""
    root = _project_with_others(tmp_path)
    cache = root / ".gradmode_cache"
    cold, _ = _findings(root, jobs=1)
    victim = tmp_path / "victim"
    (cache / f"cache.sqlite3{suffix}").symlink_to(victim)
    (root / "engine" / "other0.py").write_text("def f0():\n    return 10\n")
    assert _findings(root, jobs=1)[0] == cold
    assert not victim.exists() and not (cache / f"cache.sqlite3{suffix}").is_symlink()
    assert cache_rows(cache)[os.path.join("engine", "other0.py")][1]["functions"]["f0"]["rets"]


def test_a_file_removed_then_restored_is_summarised_again(tmp_path, monkeypatch):
    root = _project_with_others(tmp_path)
    cache = root / ".gradmode_cache"
    cold, _ = _findings(root, jobs=1)
    warm = root / "engine" / "warm.py"
    warm.unlink()
    assert _findings(root, jobs=1)[0] == []
    assert os.path.join("engine", "warm.py") not in cache_rows(cache)
    warm.write_text(BUGGY["engine/warm.py"])
    summarised = _summarised_in(monkeypatch)
    assert _findings(root, jobs=1)[0] == cold and summarised == [os.path.join("engine", "warm.py")]
    write_cache_fact(cache, "results", None)
    summarised.clear()
    assert _findings(root, jobs=1)[0] == cold and summarised == []


def test_the_file_size_limit_is_part_of_a_cached_result(tmp_path):
    root = write_package(tmp_path / "repo", BUGGY)
    warm = os.path.join("engine", "warm.py")
    found, run = _findings(root, max_bytes=10)
    assert found == [] and [e.path for e in run.errors] == [warm]
    found, run = _findings(root)  # no limit: the file is analysed, not the over-the-limit result reused
    assert [code for *_, code in found] == ["GM101"] and run.errors == []
    found, run = _findings(root, max_bytes=10)  # nor is its cached summary used once it is over the limit
    assert found == [] and [e.path for e in run.errors] == [warm]


@pytest.mark.parametrize("front_end", ["cli", "server"])
def test_a_cache_file_larger_than_the_source_can_make_is_never_opened(tmp_path, front_end):
    """A checkout may ship a cache file padded far past what its source gives (32 bytes a byte, and 16 MB): it is
    no cache of this project, so nothing of it is read, not even the files' stamps, and the run analyses afresh."""
    from lints.summary_cache import CACHE_SLACK_BYTES, MemorySummaries

    root = write_package(tmp_path / "repo", BUGGY)
    found, first = _findings(root)
    assert first.analysis is not None and found
    write_cache_fact(root / ".gradmode_cache", "padding", "x" * (CACHE_SLACK_BYTES + (1 << 20)))
    padded = (root / ".gradmode_cache" / "cache.sqlite3").stat().st_size
    assert padded > CACHE_SLACK_BYTES
    again, run = _findings(root, summary_cache=MemorySummaries() if front_end == "server" else None)
    assert run.analysis is not None and again == found  # the padded file was not read: no hit
    if front_end == "server":  # the server never writes it
        assert (root / ".gradmode_cache" / "cache.sqlite3").stat().st_size == padded
    else:  # replaced by the run's own
        assert (root / ".gradmode_cache" / "cache.sqlite3").stat().st_size < CACHE_SLACK_BYTES
        assert _findings(root)[1].analysis is None


def test_a_loose_run_spelling_its_files_two_ways_reuses_and_keeps_their_rows(tmp_path, monkeypatch):
    """Rows are kept by the path from the root; a file spelt otherwise than the root (``script.py`` beside an
    absolute package) still finds its row, and no save writes a row and then removes it."""
    from lints import summary_jobs

    folder = tmp_path / "loose"
    (folder / "pkg").mkdir(parents=True)  # no project marker
    (folder / "script.py").write_text("import pkg.mod\npkg.mod.warmup(None)\n")
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "pkg" / "mod.py").write_text(BUGGY["engine/warm.py"])
    made = []
    real = summary_jobs._summarize_job
    monkeypatch.setattr(summary_jobs, "_summarize_job", lambda *args: made.append(args[0].path) or real(*args))
    paths = ["script.py", str(folder / "pkg")]
    mod = folder / "pkg" / "mod.py"
    with chdir(folder):
        first = lint_project(paths, Config(), cache_dir=tmp_path / "cache")
        assert made and [f.code for f in first.findings] == ["GM101"]
        for round_number in range(2):  # an edit of the package: analysed again, every other summary a row's
            mod.write_text(mod.read_text() + f"def helper_{round_number}(x):\n    return x.sum()\n")
            made.clear()
            again = lint_project(paths, Config(), cache_dir=tmp_path / "cache")
            assert again.analysis is not None and [os.path.abspath(p) for p in made] == [str(mod)]
            assert [(f.path, f.line) for f in again.findings] == [(f.path, f.line) for f in first.findings]


def test_a_hit_writes_nothing_when_a_file_is_spelt_otherwise_than_its_row(tmp_path, monkeypatch):
    """A file given by its absolute path beside a relative root (one outside the project): its stamp is kept by its
    row, so a hit finds it as it was and writes nothing (no lock taken, no stamp rewritten on every run)."""
    import time

    from lints.summary_cache import SummaryCache

    root = write_package(tmp_path / "repo", BUGGY)
    other = tmp_path / "other"
    other.mkdir()
    (other / "tool.py").write_text("import torch\n")
    paths = ["engine", str(other / "tool.py")]
    time.sleep(2.1)  # the files' stamps old enough to be trusted (``walk.settled``)
    with chdir(root):
        for _ in range(2):  # cold, then a run that learns the stamps
            lint_project(paths, Config())
        written = []
        real = SummaryCache._store
        monkeypatch.setattr(SummaryCache, "_store", lambda self, rows: written.extend(rows) or real(self, rows))
        assert lint_project(paths, Config()).analysis is None
    assert written == []


def test_the_language_servers_cache_is_read_by_two_threads_at_once(tmp_path):
    """The server's analysis asks which summaries mention a name while its actions read summaries from the folder
    (a fix after a hit): neither sees the other's half-made change."""
    import threading

    from lints.summary_cache import MemorySummaries, SummaryCache
    from lints.summary_records import SCHEMA

    folder = tmp_path / "cache"
    disk = SummaryCache(folder)
    paths = [f"pkg/m{i}.py" for i in range(1500)]
    for path in paths:
        disk.put(path, "k" + path, {"schema": SCHEMA, "path": path, "module": path[:-3].replace("/", "."),
                                    "package": False, "star": [], "functions": {}, "classes": {}})
    disk.save()
    disk.close()
    cache = MemorySummaries()
    cache.read_beside(folder, ".")
    cache.put("pkg/own.py", "k", {"schema": SCHEMA, "path": "pkg/own.py", "module": "pkg.own", "package": False,
                                  "star": [], "functions": {}, "classes": {}})
    failures, done = [], threading.Event()

    def read_all():
        try:
            for path in paths:
                assert cache.get(path, "k" + path) is not None
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            done.set()

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        reader = threading.Thread(target=read_all)
        reader.start()
        while not done.is_set():
            try:
                found = cache.rows_mentioning(["pkg"])
                assert found is not None and "pkg/own.py" in found[0]
            except BaseException as exc:  # noqa: BLE001
                failures.append(exc)
                break
        reader.join()
    finally:
        sys.setswitchinterval(switch)
    assert not failures, failures
    assert cache.held() == len(paths) + 1


def test_a_results_cache_of_the_wrong_shape_is_a_miss(tmp_path):
    root = write_package(tmp_path / "repo", BUGGY)
    cold, _ = _findings(root)
    cache = root / ".gradmode_cache"
    good = cache_fact(cache, "results")
    finding = good["findings"][0]
    for garble in ({"findings": [5]}, {"findings": [[finding]]}, {"findings": [dict(finding, fixes=[5])]},
                   {"findings": [dict(finding, fixes=[dict(finding["fixes"][0], at=["x", "y"])])]},
                   {"errors": [5]}, {"serving": [1]}, {"serving": 5}):
        write_cache_fact(cache, "results", dict(good, **garble))
        found, run = _findings(root)
        assert found == cold and run.analysis is not None, garble
        assert cache_fact(cache, "results") == good  # and rewritten
    write_cache_fact(cache, "results", "not a record")
    found, run = _findings(root)
    assert found == cold and run.analysis is not None and cache_fact(cache, "results") == good


def test_a_cached_summary_of_the_wrong_shape_is_a_miss(tmp_path, monkeypatch):
    root = write_package(tmp_path / "repo", BUGGY)
    cold, _ = _findings(root)
    cache = root / ".gradmode_cache"
    good = cache_rows(cache)
    warm = os.path.join("engine", "warm.py")
    arguments_no_list = json.loads(json.dumps(good[warm][1]["functions"]))
    arguments_no_list["warmup"]["calls"] = [[["n", "torch.empty"], 5, {}, 3, 4, -1, -1]]
    for field, value in (("classes", []), ("classes", {"A": 5}), ("functions", 5), ("functions", {"warmup": 5}),
                         ("functions", None), ("functions", arguments_no_list), ("star", 5), ("package", "yes"),
                         ("module", 5)):
        rows = json.loads(json.dumps(good))
        rows[warm][1][field] = value
        if value is None:
            del rows[warm][1][field]
        write_cache_rows(cache, rows)
        write_cache_fact(cache, "results", None)
        summarised = _summarised_in(monkeypatch)
        assert _findings(root)[0] == cold, (field, value)
        assert summarised == [warm]  # that entry alone is redone
        monkeypatch.undo()


def test_a_cached_summary_garbled_deep_inside_is_summarised_again(tmp_path, monkeypatch):
    files = dict(BUGGY)
    files["engine/other.py"] = "def f():\n    return 1\n"
    root = write_package(tmp_path / "repo", files)
    cold, _ = _findings(root)
    cache = root / ".gradmode_cache"
    rows = cache_rows(cache)
    warm = os.path.join("engine", "warm.py")
    # past the checks made when it is taken and decoded: a call inside a with statement the function lacks
    rows[warm][1]["functions"]["warmup"]["calls"] = [[["n", "torch.empty"], [], {}, 3, 4, 99, -1]]
    write_cache_rows(cache, rows)
    write_cache_fact(cache, "results", None)
    summarised = _summarised_in(monkeypatch)
    assert _findings(root)[0] == cold
    assert sorted(summarised) == sorted(str(p.relative_to(root)) for p in root.rglob("*.py"))  # all afresh
    assert cache_rows(cache)[warm][1]["functions"]["warmup"]["calls"][0][5] != 99
    assert _findings(root)[1].analysis is None  # and the result was saved


@pytest.mark.parametrize("calls", [[[["n", "torch.empty"], [], {}]], [[5, [], {}, 3, 4, -1, -1]]],
                         ids=["a call record too short", "a callee that is not an expression"])
def test_a_cached_row_whose_records_do_not_decode_is_a_miss(tmp_path, monkeypatch, calls):
    """Records that cannot be made what they are (the decoding shares their names and empties) are no summary: the
    file is summarised again, whether or not the run took any other summary from the cache before it."""
    root = write_package(tmp_path / "repo", BUGGY)
    cold, _ = _findings(root)
    cache = root / ".gradmode_cache"
    rows = cache_rows(cache)
    warm = os.path.join("engine", "warm.py")
    for path in rows:  # every row garbled: none is taken before the error
        for fn in rows[path][1]["functions"].values():
            fn["calls"] = calls
    write_cache_rows(cache, rows)
    write_cache_fact(cache, "results", None)
    summarised = _summarised_in(monkeypatch)
    assert _findings(root)[0] == cold
    assert warm in summarised


def test_an_analysis_error_with_only_fresh_summaries_is_raised(tmp_path, monkeypatch):
    import pytest

    from lints import engine

    root = write_package(tmp_path / "repo", BUGGY)
    _findings(root)
    write_cache_fact(root / ".gradmode_cache", "results", None)
    calls = []

    def broken(summaries, config, jobs=1):
        calls.append(len(summaries))
        raise KeyError("a bug of ours")

    monkeypatch.setattr(engine, "analyse", broken)
    with pytest.raises(KeyError):
        _findings(root)  # with cached summaries: tried once more with fresh ones, which fails too
    assert len(calls) == 2
    calls.clear()
    with pytest.raises(KeyError):
        _findings(root, use_cache=False)
    assert len(calls) == 1


def _cli_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "GRADMODE_CACHE_DIR"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_cache_files_linked_to_a_device_are_not_read(tmp_path):
    import resource

    root = write_package(tmp_path / "repo", BUGGY)
    cache = root / ".gradmode_cache"
    cache.mkdir()
    for name in ("cache.sqlite3", "cache.sqlite3-journal", "cache.sqlite3-wal"):
        (cache / name).symlink_to("/dev/zero")

    def bounded():  # were the device read, this stops it: at 2 GiB (MemoryError) or a minute of CPU
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        resource.setrlimit(resource.RLIMIT_CPU, (60, 60))

    with open(tmp_path / "out", "w") as out:
        child = subprocess.Popen([sys.executable, "-m", "lints", "-j", "1", "."], cwd=root, env=_cli_env(),
                                 stdout=out, stderr=subprocess.STDOUT, preexec_fn=bounded)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    output = (tmp_path / "out").read_text()
    assert child.returncode == 1 and "GM101" in output, output
    assert usage.ru_maxrss < 256 << 10  # KiB: the device was not read into memory
    assert (cache / "cache.sqlite3").is_file() and not (cache / "cache.sqlite3").is_symlink()  # ours now
    assert not any((cache / name).is_symlink() for name in ("cache.sqlite3-journal", "cache.sqlite3-wal"))


def test_a_fifo_as_a_cache_file_does_not_block(tmp_path):
    root = write_package(tmp_path / "repo", BUGGY)
    cache = root / ".gradmode_cache"
    cache.mkdir()
    os.mkfifo(cache / "cache.sqlite3")
    result = subprocess.run([sys.executable, "-m", "lints", "-j", "1", "."], cwd=root, capture_output=True,
                            text=True, env=_cli_env(), timeout=60)
    assert result.returncode == 1 and "GM101" in result.stdout, result.stderr


def test_a_gitignore_link_in_the_cache_is_not_written_through(tmp_path):
    root = write_package(tmp_path / "repo", BUGGY)
    (tmp_path / "victim").mkdir()
    cache = root / ".gradmode_cache"
    cache.mkdir()
    (cache / ".gitignore").symlink_to(os.path.join("..", "..", "victim", "x"))  # dangling
    found, _ = _findings(root)
    assert [code for *_, code in found] == ["GM101"]
    assert not (tmp_path / "victim" / "x").exists() and (cache / ".gitignore").is_symlink()
    assert cache_fact(cache, "results") is not None


@pytest.mark.parametrize("front_end", ["lints", "lints.codemod", "flake8"])
def test_a_cache_folder_linked_elsewhere_is_neither_read_nor_written(tmp_path, front_end):
    """A checkout's `.gradmode_cache` may be a link to any folder of the user's: nothing goes through
    it (each file there would have been replaced by a cache file), and the run still lints."""
    root = write_package(tmp_path / "repo", BUGGY)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "results.json").write_text("the user's own\n")
    (root / ".gradmode_cache").symlink_to(victim)
    args = {"lints": ["-j", "2", "."], "lints.codemod": ["--diff", "."], "flake8": ["-j", "2", "--select", "GM", "."]}
    proc = subprocess.run([sys.executable, "-m", front_end, *args[front_end]], cwd=root, capture_output=True,
                          text=True, env=_cli_env(), timeout=120)
    assert ("GM101" if front_end != "lints.codemod" else "+++ ") in proc.stdout, proc
    assert sorted(os.listdir(victim)) == ["results.json"]
    assert (victim / "results.json").read_text() == "the user's own\n"
    assert proc.stderr.count("it is a symbolic link") <= (2 if front_end == "flake8" else 1), proc.stderr


def test_a_pyproject_edited_in_place_with_its_mtime_set_back_is_read_again(tmp_path):
    """declares_config answers from memory while a file stays the same: an edit of the same size with
    the old mtime put back (copy2 from fixtures sharing one mtime) must still be seen."""
    from lints.options import declares_config

    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.gradmode]\n")
    before = config.stat()
    assert declares_config(tmp_path)
    config.write_text("[tool.gradmodx]\n")
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert config.stat().st_size == before.st_size and config.stat().st_mtime_ns == before.st_mtime_ns
    assert not declares_config(tmp_path)


def test_summaries_of_another_interpreter_are_not_reused(tmp_path):
    """What parses depends on the interpreter's `ast` (tox runs several on one checkout): a cache
    written under another version is a miss."""
    from lints import summary_cache

    root = write_package(tmp_path / "repo", BUGGY)
    _findings(root, jobs=1)
    cache = root / ".gradmode_cache"
    written = cache_fact(cache, "format")
    assert written == summary_cache.CACHE_FORMAT and written.endswith(
        f"{sys.implementation.name}-{sys.version_info.major}.{sys.version_info.minor}")
    write_cache_fact(cache, "format", written.rsplit("/", 1)[0] + "/cpython-3.99")
    write_cache_fact(cache, "results", dict(cache_fact(cache, "results"), findings=[]))  # what it found, say
    found, run = _findings(root, jobs=1)
    assert [code for *_, code in found] == ["GM101"] and run.analysis is not None  # analysed afresh


def test_the_summaries_cache_is_decoded_with_the_collector_paused(tmp_path, monkeypatch):
    """The codemod's and --format json's import check reread the whole summaries cache on a results
    hit with the cyclic collector on: 4.6 s instead of 0.8 s on sglang 0.5.15."""
    import gc

    from lints import fix_inputs, summary_cache

    root = write_package(tmp_path / "repo", BUGGY)
    (root / "pyproject.toml").write_text("[tool.gradmode]\n")
    _, first = _findings(root, cache_dir=tmp_path / "cache")
    _, hit = _findings(root, cache_dir=tmp_path / "cache")
    assert hit.analysis is None  # the results came from the cache
    collector_on = []
    real_loads = summary_cache.json.loads

    def loads(text, *args, **kwargs):
        collector_on.append(gc.isenabled())
        return real_loads(text, *args, **kwargs)

    monkeypatch.setattr(summary_cache.json, "loads", loads)
    assert gc.isenabled()
    with chdir(root):
        assert fix_inputs.names_imported_elsewhere(hit, Config()) != {}
    assert collector_on and not any(collector_on), collector_on
    assert gc.isenabled()


def test_an_editors_buffer_as_saved_reuses_the_result_and_an_edited_one_does_not(tmp_path):
    """`--stdin-filename` never read the results cache: every editor run redid the whole-project
    analysis (1.9 s on sglang 0.5.15, 0.24 s now for a buffer that is the file as saved)."""
    root = write_package(tmp_path / "repo", BUGGY)
    (root / "pyproject.toml").write_text("[tool.gradmode]\n")
    cache = tmp_path / "cache"
    saved, first = _findings(root, cache_dir=cache)
    assert saved and first.analysis is not None
    path = os.path.join("engine", "warm.py")
    text = (root / path).read_text()
    with chdir(root):
        same = lint_project([path], Config(), cache_dir=cache, overrides={path: text})
        edited = lint_project([path], Config(), cache_dir=cache,
                              overrides={path: text.replace("torch.inference_mode()", "torch.no_grad()")})
        again = lint_project(["."], Config(), cache_dir=cache)
    assert same.analysis is None and [(f.line, f.code) for f in same.findings] == [(3, "GM101")]
    assert edited.analysis is not None and edited.findings == []
    assert again.analysis is None  # the edited buffer's result was not saved over the files' own


def test_a_buffer_whose_utf8_is_the_files_bytes_under_another_cookie_is_not_the_file(tmp_path):
    """The buffer was keyed by its UTF-8 bytes, the file by its own: under a latin-1 cookie the file's
    bytes `C3 A9` read as two characters, the buffer's `é` as one, yet both had one key, and the
    buffer got the file's finding with the file's columns."""
    root = write_package(tmp_path / "repo", {})
    (root / "pyproject.toml").write_text("[tool.gradmode]\n")
    head = b"# -*- coding: latin-1 -*-\nimport torch\ndef warmup(model):\n    s = '"
    tail = b"'; ctx = torch.inference_mode()\n    with ctx:\n        model()\n"
    (root / "warm.py").write_bytes(head + b"\xc3\xa9\xc3\xa9" + tail)
    buffer = (head + b"\xe9\xe9" + tail).decode("latin-1")
    cache = tmp_path / "cache"
    _, on_disk = _findings(root, cache_dir=cache)
    with chdir(root):
        edited = lint_project(["warm.py"], Config(), cache_dir=cache, overrides={"warm.py": buffer})
        fresh = lint_project(["warm.py"], Config(), use_cache=False, overrides={"warm.py": buffer})
    assert [(f.line, f.col) for f in on_disk.findings] == [(4, 22)]
    assert edited.analysis is not None
    assert [(f.line, f.col) for f in edited.findings] == [(f.line, f.col) for f in fresh.findings] == [(4, 20)]


def test_quiet_leaves_the_cache_warning_out_and_keeps_the_findings(tmp_path):
    root = write_package(tmp_path / "repo", BUGGY)
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache folder would be\n")  # unwritable, even by root
    for quiet, warned in (([], True), (["-q"], False)):
        proc = run_module("lints", ".", "--cache-dir", str(cache), "--format", "concise", *quiet, cwd=root)
        assert proc.returncode == 1 and "GM101" in proc.stdout
        assert ("warning: cannot write cache" in proc.stderr) is warned, proc.stderr
    fix = run_module("lints.codemod", ".", "--cache-dir", str(cache), "--diff", "-q", cwd=root)
    assert fix.returncode == 1 and "warning" not in fix.stderr, fix.stderr


def test_a_long_lived_process_reads_a_file_again_only_when_its_stamp_changed(tmp_path, monkeypatch):
    """The language server hashes every file of the project on each run: a file whose size, times and inode
    are as they were is not read again, unless it was written too recently to tell an edit from it."""
    from lints import summary_jobs, walk

    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    old = os.stat(path).st_mtime_ns - 10 * 10**9
    os.utime(path, ns=(old, old))
    monkeypatch.setattr(walk, "RACY_NANOSECONDS", 0)  # its ctime is now: trusted all the same, here
    hashed = []
    real = summary_jobs.file_key
    monkeypatch.setattr(summary_jobs, "file_key", lambda raw: hashed.append(raw) or real(raw))
    known: dict = {}
    first = summary_jobs.content_key(str(path), known=known)
    assert summary_jobs.content_key(str(path), known=known) == first and len(hashed) == 1
    path.write_text("x = 2\n")  # same size; its mtime put back: the ctime still moves
    os.utime(path, ns=(old, old))
    second = summary_jobs.content_key(str(path), known=known)
    assert second != first and len(hashed) == 2
    # written just now: its stamp is not kept, so an edit within the clock's resolution is still seen
    monkeypatch.undo()
    monkeypatch.setattr(summary_jobs, "file_key", lambda raw: hashed.append(raw) or real(raw))
    fresh = tmp_path / "n.py"
    fresh.write_text("y = 1\n")
    summary_jobs.content_key(str(fresh), known=known)
    summary_jobs.content_key(str(fresh), known=known)
    assert len(hashed) == 4 and str(fresh) not in known
    assert summary_jobs.content_key(str(tmp_path / "gone.py"), known=known) == ""


def test_a_remembered_walk_is_reused_only_while_its_folders_and_ignore_files_are_as_they_were(tmp_path, monkeypatch):
    """The language server walks the project on every keystroke: a walk is kept while every folder it listed
    (a folder's times move when an entry is added, removed or renamed in it), and the `.gitignore`,
    `.git` and `pyproject.toml` in them and above them, are as they were."""
    from lints import walk
    from lints.project_roots import is_own_project

    monkeypatch.setattr(walk, "RACY_NANOSECONDS", 0)  # stamps made just now are trusted, here
    root = write_package(tmp_path / "repo", {"engine/a.py": "", "engine/sub/b.py": ""})
    listed = []
    real = os.scandir
    monkeypatch.setattr(walk.os, "scandir", lambda path: listed.append(path) or real(path))
    memo: dict = {}

    def files(remembered: bool = True) -> list[str]:
        walk.gitignore.forget()  # as each run does
        with walk.walks_remembered(memo) if remembered else contextlib.nullcontext():
            found, _ = walk.discover([str(root)], (), stop_at=is_own_project)
        return sorted(os.path.relpath(f, root) for f in found)

    first = files()
    assert os.path.join("engine", "sub", "b.py") in first and listed
    listed.clear()
    assert files() == first and listed == []  # nothing changed: nothing listed again
    (tmp_path / ".git").mkdir()  # the checkout's root, above the folder walked
    for change in (lambda: (root / "engine" / "sub" / "c.py").write_text(""),
                   lambda: (root / "engine" / ".gitignore").write_text("a.py\n"),
                   lambda: (root / "engine" / ".gitignore").write_text("sub/\n"),
                   lambda: (root / "engine" / ".gitignore").unlink(),
                   lambda: (root / "engine" / "sub" / "c.py").unlink(),
                   lambda: (root / "engine" / "sub" / "pyproject.toml").write_text("[tool.gradmode]\n"),
                   lambda: (tmp_path / ".gitignore").write_text("a.py\n")):
        before = files()
        change()
        listed.clear()
        found = files()
        assert listed and found == files(remembered=False) != before  # walked again, as a walk without it


def test_a_walk_kept_in_the_cache_folder_serves_the_next_run_while_its_folders_are_as_they_were(
        tmp_path, monkeypatch):
    """Each run of the CLI or a hook walks the project (15 ms of a 120 ms carry on sglang): the walk is kept in a
    file and taken again, listing no folder, while every folder it listed, and the deciding files in them and above
    them, are as they were; after any change it is walked again, as a run without the file walks it. A file of
    another shape, one naming what no walk lists, or a link is no walk."""
    import json

    from lints import walk
    from lints.project_roots import is_own_project

    monkeypatch.setattr(walk, "RACY_NANOSECONDS", 0)  # stamps made just now are trusted, here
    root = write_package(tmp_path / "repo", {"engine/a.py": "", "engine/sub/b.py": ""})
    kept = tmp_path / "walks.json"
    listed = []
    real = os.scandir
    monkeypatch.setattr(walk.os, "scandir", lambda path: listed.append(path) or real(path))

    def files(keep: bool = True) -> list[str]:
        walk.gitignore.forget()  # as each run does
        with walk.walks_kept_in(str(kept) if keep else None, "this tool"):
            found, _ = walk.discover([str(root)], (), stop_at=is_own_project)
        return sorted(os.path.relpath(f, root) for f in found)

    first = files()
    assert os.path.join("engine", "sub", "b.py") in first and listed and kept.is_file()
    listed.clear()
    assert files() == first and listed == []  # nothing changed: nothing listed again
    (tmp_path / ".git").mkdir()  # the checkout's root, above the folder walked
    for change in (lambda: (root / "engine" / "sub" / "c.py").write_text(""),
                   lambda: (root / "engine" / ".gitignore").write_text("a.py\n"),
                   lambda: (root / "engine" / ".gitignore").write_text("sub/\n"),  # the same size, in place
                   lambda: (root / "engine" / ".gitignore").unlink(),
                   lambda: (root / "engine" / "sub" / "c.py").unlink(),
                   lambda: (root / "engine" / "sub" / "pyproject.toml").write_text("[tool.gradmode]\n"),
                   lambda: (tmp_path / ".gitignore").write_text("a.py\n"),
                   lambda: (tmp_path / ".git" / "info").mkdir() or (tmp_path / ".git" / "info" / "exclude").write_text(
                       "__init__.py\n")):
        before = files()
        change()
        listed.clear()
        found = files()
        assert listed and found == files(keep=False) != before  # walked again, as a walk without it
    # the language server's own memo stands: the file is neither read nor written under it
    kept.unlink()
    with walk.walks_remembered({}):
        files()
    assert not kept.exists()
    files()
    good = json.loads(kept.read_text())
    key, stamps, walked, stopped, unlisted = good["walks"][0]
    above = walk._above(key[0])
    no_stamps = [None] * len(walk._DECIDING_STAMPS)

    def planted_walk(**changed) -> dict:
        fields = {**dict(key=key, stamps=stamps, walked=walked, stopped=stopped, unlisted=unlisted), **changed}
        return {**good, "walks": [[fields[name] for name in ("key", "stamps", "walked", "stopped", "unlisted")]]}

    def unlisted_also(folder: str) -> dict:  # a folder that could not be listed, with its stamps (none)
        listed = len(walked) + len(stopped)
        return dict(unlisted=[folder],
                    stamps=[*stamps[:len(no_stamps) * listed], *no_stamps, *stamps[len(no_stamps) * listed:]])

    shape = unlisted_also(os.path.join(key[0], "x"))  # a well-shaped walk: what makes each below one no walk is its own
    assert unlisted == [] and walk._seen_by(key[0], key[1], [w[0] for w in walked], stopped, shape["unlisted"],
                                            shape["stamps"])
    ghost = os.path.join(walked[0][0], "ghost")
    planted = [{**good, "format": "other"}, {**good, "tool": "another version"},
               # nothing walked (only the folders above, whose stamps anyone can write): a project without files
               planted_walk(stamps=no_stamps * len(above), walked=[]),
               # a folder that is not there, with no stamp of its own
               planted_walk(stamps=[*stamps[:len(no_stamps)], *no_stamps, *stamps[-len(no_stamps) * len(above):]],
                            walked=[walked[0], [ghost, ["evil.py"], []]], stopped=[]),
               planted_walk(stamps=[None] * len(stamps)),  # no stamp of any folder
               planted_walk(**unlisted_also(os.path.join(key[0], "\u0000"))),  # a name no file system holds
               planted_walk(**unlisted_also("/etc")),  # a folder outside the walk
               planted_walk(walked=[[walked[0][0], ["../../outside.py"], []], *walked[1:]]),
               planted_walk(walked=[[str(tmp_path), [], []], *walked[1:]]),
               planted_walk(stamps=[[1, 2, 3, 4, 5]] * len(stamps))]
    for data in planted:
        kept.write_text(json.dumps(data))
        listed.clear()
        assert files() == files(keep=False) and listed
    # the walks of the latest runs, at most MAX_KEPT_WALKS of them: one of each folder given
    folders = []
    for n in range(walk.MAX_KEPT_WALKS + 2):
        folders.append(write_package(tmp_path / f"other{n}", {"pkg/m.py": ""}))
        with walk.walks_kept_in(str(kept), "this tool"):
            walk.discover([str(folders[-1])], (), stop_at=is_own_project)
    held = [kept_walk[0][0] for kept_walk in json.loads(kept.read_text())["walks"]]
    assert len(held) == walk.MAX_KEPT_WALKS and held[0] == str(folders[-1])
    victim = tmp_path / "victim.json"
    victim.write_text(json.dumps(good))
    kept.unlink()
    kept.symlink_to(victim)
    listed.clear()
    assert files() == files(keep=False) and listed  # not read through a link, and replaced, not written through
    assert not kept.is_symlink() and json.loads(victim.read_text()) == good


_MEDDLED: list = []  # the file ``_meddling`` writes


def _meddling(folder: str, names) -> bool:
    """A walk's ``stop_at`` (of a module: a kept walk names it) that, asked of a folder named ``b``, adds a file to
    the folder listed before it."""
    if os.path.basename(folder) == "b" and _MEDDLED:
        with open(_MEDDLED[0], "w"):
            pass
    return False


def test_a_folder_changed_while_the_walk_runs_is_walked_again_by_the_next_run(tmp_path, monkeypatch):
    """A kept walk stands by each folder's stamps as they were before it was listed: a file added to a folder after
    the walk listed it (a slow disk, a big tree) shows in the next run."""
    from lints import walk

    monkeypatch.setattr(walk, "RACY_NANOSECONDS", 0)  # stamps made just now are trusted, here
    root = write_package(tmp_path / "repo", {"a/m.py": "", "b/n.py": ""})
    monkeypatch.setattr(sys.modules[__name__], "_MEDDLED", [str(root / "a" / "late.py")])
    kept = str(tmp_path / "walks.json")
    runs = []
    for _ in range(2):
        with walk.walks_kept_in(kept, "this tool"):
            runs.append([os.path.relpath(f, root) for f in walk.discover([str(root)], (), stop_at=_meddling)[0]])
    assert os.path.join("a", "late.py") not in runs[0] and os.path.join("a", "late.py") in runs[1]


def test_a_walk_through_links_is_not_kept(tmp_path, monkeypatch):
    """A link's stamp is not its target's: a walk whose folders hold a settings file or an ignore file through a link,
    or a `*.py` link, is walked again by each run (the target may have changed)."""
    from lints import walk
    from lints.project_roots import is_own_project

    monkeypatch.setattr(walk, "RACY_NANOSECONDS", 0)  # stamps made just now are trusted, here
    listed = []
    real = os.scandir
    monkeypatch.setattr(walk.os, "scandir", lambda path: listed.append(path) or real(path))
    for n, link in enumerate(("sub/pyproject.toml", "sub/.gitignore", "sub/gen.py")):
        root = write_package(tmp_path / f"repo{n}", {"sub/m.py": "", "target/x.py": ""})
        (root / link).symlink_to(root / "target" / ("x.py" if link.endswith(".py") else "settings"))
        kept = str(tmp_path / f"walks{n}.json")
        for _ in range(2):
            listed.clear()
            with walk.walks_kept_in(kept, "this tool"):
                walk.discover([str(root)], (), stop_at=is_own_project)
            assert listed, link


def test_a_run_takes_the_walk_the_last_one_kept(tmp_path, monkeypatch):
    """A rerun of the CLI lists no folder of an unchanged project, and finds what the run that walked found; one
    after a new file walks again and analyses it."""
    from lints import walk

    monkeypatch.setattr(walk, "RACY_NANOSECONDS", 0)  # the files were written just now
    root = _project_with_others(tmp_path)
    cold, _ = _findings(root, jobs=1)
    assert _findings(root, jobs=1)[0] == cold  # (a cold run makes the cache folder after its walk: this one keeps it)
    assert (root / ".gradmode_cache" / walk.WALKS_FILE).is_file()
    listed = []
    real = os.scandir
    monkeypatch.setattr(walk.os, "scandir", lambda path: listed.append(path) or real(path))
    found, run = _findings(root, jobs=1)
    assert found == cold and run.analysis is None and listed == []
    (root / "engine" / "late.py").write_text("import torch\n_late = torch.zeros(1)\n")
    found, run = _findings(root, jobs=1)
    assert listed and os.path.join("engine", "late.py") in {os.path.normpath(p) for p in run.files}


def test_the_cache_keeps_each_files_stamp_so_a_rerun_hashes_only_what_changed(tmp_path, monkeypatch):
    from lints import summary_jobs, walk

    monkeypatch.setattr(walk, "RACY_NANOSECONDS", 0)  # the files were written just now
    root = _project_with_others(tmp_path)
    cold, _ = _findings(root, jobs=1)
    hashed = []
    real = summary_jobs.file_key
    monkeypatch.setattr(summary_jobs, "file_key", lambda raw: hashed.append(raw) or real(raw))
    _findings(root, jobs=1)  # a hit: no file hashed again, the cold run kept the stamps its workers took
    assert hashed == []
    found, run = _findings(root, jobs=1)
    assert found == cold and run.analysis is None and hashed == []  # nothing read again
    (root / "engine" / "other2.py").write_text("def f2():\n    return 22\n")
    found, run = _findings(root, jobs=1)
    assert found == cold and hashed and all(raw == b"def f2():\n    return 22\n" for raw in hashed)
    # a stamp that lies (the checkout's to plant) names a key: the row of that key must match it, or it is a miss
    rows = cache_rows(root / ".gradmode_cache")
    warm = os.path.join("engine", "warm.py")
    import sqlite3

    with contextlib.closing(sqlite3.connect(root / ".gradmode_cache" / "cache.sqlite3")) as db, db:
        db.execute("UPDATE summaries SET stamp = '[1, 2, 3]' WHERE path = ?", (warm.encode(),))
    write_cache_fact(root / ".gradmode_cache", "results", None)
    assert _findings(root, jobs=1)[0] == cold and rows == cache_rows(root / ".gradmode_cache")


def test_a_run_that_summarises_in_bulk_gives_the_freed_memory_back_and_a_hit_does_not(tmp_path, monkeypatch):
    from lints import engine, freed_memory

    calls = []
    monkeypatch.setattr(engine, "BULK_SUMMARIES", 2)
    monkeypatch.setattr(engine, "give_back_freed_memory", lambda: calls.append(1) or True)
    root = write_package(tmp_path / "repo", BUGGY)
    cold, _ = _findings(root)
    assert calls == [1]
    write_cache_fact(root / ".gradmode_cache", "results", None)  # an analysis again, every summary from the cache
    assert _findings(root)[0] == cold
    assert calls == [1]
    import platform
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert freed_memory.give_back_freed_memory() is True  # glibc: the call is made, and harmless


def test_no_ctypes_means_no_freed_memory_given_back_not_an_error(monkeypatch):
    """A Python built without libffi has no ctypes: the run goes on without giving the memory back."""
    import builtins

    from lints import freed_memory

    real_import = builtins.__import__

    def without_ctypes(name, *args, **kwargs):
        if name == "ctypes":
            raise ImportError("No module named '_ctypes'")
        return real_import(name, *args, **kwargs)

    freed_memory._malloc_trim.cache_clear()  # looked up afresh, without ctypes
    monkeypatch.setattr(builtins, "__import__", without_ctypes)
    try:
        assert freed_memory.give_back_freed_memory() is False
    finally:
        freed_memory._malloc_trim.cache_clear()


def test_a_server_run_that_summarises_in_bulk_gives_the_freed_memory_back_whatever_it_reused_before(
        tmp_path, monkeypatch):
    """The language server keeps one cache across its runs: what it reused in runs before does not count against
    the files a run summarises afresh."""
    from lints import engine
    from lints.summary_cache import MemorySummaries

    calls = []
    monkeypatch.setattr(engine, "BULK_SUMMARIES", 2)
    monkeypatch.setattr(engine, "give_back_freed_memory", lambda: calls.append(1) or True)
    root = write_package(tmp_path / "repo", BUGGY)
    cache = MemorySummaries()
    _findings(root, summary_cache=cache)
    assert calls == [1]
    cache.reused = 10 ** 6  # as if earlier runs had reused that many
    for n in range(2):
        (root / "engine" / f"added{n}.py").write_text(
            f"import torch\nfrom engine.warm import warmup\n\ndef step{n}(n):\n    return warmup(n)\n")
    _findings(root, summary_cache=cache)
    assert calls == [1, 1]


def test_a_cold_run_keeps_the_stamps_its_files_were_read_by(tmp_path, monkeypatch):
    """The rerun after a cold run hashes no file again (each worker took its file's stamp before reading it), and
    an edit made after the cold run is seen: its stamp moved."""
    from lints import summary_jobs, walk

    monkeypatch.setattr(walk, "RACY_NANOSECONDS", 0)  # the files were written just now: trusted all the same, here
    root = write_package(tmp_path / "repo", BUGGY)
    cold, run = _findings(root)
    assert run.analysis is not None
    opened: list[str] = []
    real = summary_jobs._nonblocking
    monkeypatch.setattr(summary_jobs, "_nonblocking", lambda path, flags: opened.append(path) or real(path, flags))
    found, run = _findings(root)
    assert found == cold and run.analysis is None and opened == []
    (edited,) = [path for path in root.rglob("*.py") if path.read_text().strip()][:1]
    edited.write_text(edited.read_text() + "# an edit after the cold run\n")
    found, run = _findings(root)
    assert found == cold and [os.path.basename(path) for path in opened] == [edited.name]


def test_a_run_takes_the_keys_of_files_as_its_last_results_had_them_and_reads_no_rows_stamp_before_its_findings(
        tmp_path, monkeypatch):
    """The last results keep each file's stamp: a run that finds the other files as they had them takes their keys
    from there, and reads no row's stamp (every row's: 5 ms on sglang) until its findings are out. A file rewritten
    in place with its old size and times (its ctime moved) is read again, and what was learnt is kept for the next."""
    from lints import summary_cache, summary_jobs, walk
    from lints.summary_cache import SummaryCache

    monkeypatch.setattr(walk, "RACY_NANOSECONDS", 0)  # the files were written just now
    monkeypatch.setattr(summary_cache, "MAX_ROWS_ONE_BY_ONE", 1)  # as for a big project's files
    root = _project_with_others(tmp_path)
    cold, _ = _findings(root, jobs=1)
    events: list[str] = []
    real_read = SummaryCache._read_rows
    monkeypatch.setattr(SummaryCache, "_read_rows", lambda self: events.append("rows") or real_read(self))
    hashed: list[bytes] = []
    real_key = summary_jobs.file_key
    monkeypatch.setattr(summary_jobs, "file_key", lambda raw: hashed.append(raw) or real_key(raw))
    edited = root / "engine" / "other2.py"
    edited.write_text(edited.read_text() + "_new_constant = 1\n")
    found, run = _findings(root, jobs=1, findings_ready=lambda run: events.append("findings"))
    assert found == cold and run.analysis is None  # carried
    assert events[0] == "findings" and {raw.decode() for raw in hashed} == {edited.read_text()}
    before = edited.stat()
    edited.write_text(edited.read_text().replace("_new_constant", "_new_constanu"))  # the same size
    os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert edited.stat().st_size == before.st_size and edited.stat().st_mtime_ns == before.st_mtime_ns
    events.clear(), hashed.clear()
    found, run = _findings(root, jobs=1, findings_ready=lambda run: events.append("findings"))
    assert found == cold and events[0] == "findings" and {raw.decode() for raw in hashed} == {edited.read_text()}
    hashed.clear()
    found, run = _findings(root, jobs=1)
    assert found == cold and run.analysis is None and hashed == []  # a hit, with every key as the last run kept it


def test_a_run_whose_last_results_name_other_files_takes_each_files_stamp_once(tmp_path, monkeypatch):
    """A file added since the last run: the files' keys come from the rows' stamps (``known_keys_of``), each stamp the
    one the run took of its file when it listed the files (sglang's 4,719 files: a second stat costs about 10 ms)."""
    import collections

    from lints import engine, summary_jobs

    root = write_package(tmp_path / "repo", BUGGY)
    before, _ = _findings(root, cache_dir=tmp_path / "cache")
    (root / "engine" / "added.py").write_text("x = 1\n")
    taken = collections.Counter()
    real = summary_jobs.file_stamp

    def counted(status, max_bytes):
        taken[status.st_ino] += 1
        return real(status, max_bytes)

    for module in (engine, summary_jobs):
        monkeypatch.setattr(module, "file_stamp", counted)
    after, run = _findings(root, cache_dir=tmp_path / "cache")
    monkeypatch.undo()
    kept = {os.stat(root / path).st_ino for path in BUGGY if path.endswith(".py")}
    assert after == before and run.analysis is not None
    assert {inode: taken[inode] for inode in kept} == dict.fromkeys(kept, 1), taken
