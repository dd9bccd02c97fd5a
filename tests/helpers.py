"""Shared helpers: expected findings written as `# expect: CODE:COL` comments on the offending line,
temp packages written from {relative path: source} dicts, and the project lint run on them."""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Union

from lints.options import Config

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*(?P<items>(?:GM\d{3}:\d+\s*)+)")
# Every rule on, opt-in ones included: rule fixtures must show what each rule finds.
ALL_ON = Config(extend_select=("GM2",))
# The file name a single-source example is written to.
SINGLE = "example.py"


def expected_findings(source: str) -> set[tuple[str, int, int]]:
    """{(code, line, 1-based column)} from `# expect: GM101:14 GM202:9` comments."""
    out = set()
    for lineno, line in enumerate(source.splitlines(), 1):
        match = EXPECT.search(line)
        if match:
            for item in match.group("items").split():
                code, col = item.split(":")
                out.add((code, lineno, int(col)))
    return out


def as_files(example: Union[str, dict]) -> dict[str, str]:
    """A rule example (one source, or {relative path: source}) as {relative path: source}."""
    return dict(example) if isinstance(example, dict) else {SINGLE: example}


def expected_in_files(files: dict[str, str]) -> set[tuple[str, str, int, int]]:
    """{(path, code, line, 1-based column)} over every file of a package."""
    return {(os.path.normpath(path), code, line, col)
            for path, source in files.items() for code, line, col in expected_findings(source)}


def write_package(tmp_path: Path, files: dict[str, str]) -> Path:
    """Write ``files`` under ``tmp_path`` with an empty pyproject.toml (the project root) and an
    ``__init__.py`` in every package folder that has none; returns ``tmp_path``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").touch()
    for rel, source in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        folder = path.parent
        while folder != tmp_path and tmp_path in folder.parents:
            init = folder / "__init__.py"
            if not init.exists():
                init.write_text("")
            folder = folder.parent
    return tmp_path


@contextlib.contextmanager
def chdir(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def lint_run(tmp_path: Path, files: dict[str, str], config: Config, paths=None, **kwargs):
    """Write the package and lint it with ``lint_project`` from inside it (relative paths, no cache)."""
    write_package(tmp_path, files)
    with chdir(tmp_path):
        from lints.engine import lint_project

        kwargs.setdefault("use_cache", False)
        return lint_project(list(paths) if paths is not None else sorted(files), config, **kwargs)


def as_set(findings) -> set[tuple[str, str, int, int]]:
    return {(os.path.normpath(f.path), f.code, f.line, f.col + 1) for f in findings}


def lint_files(tmp_path: Path, files: dict[str, str], config: Config) -> set[tuple[str, str, int, int]]:
    """{(relative path, code, line, 1-based column)} that ``lint_project`` reports for ``files``."""
    run = lint_run(tmp_path, files, config)
    assert not run.errors, run.errors
    return as_set(run.findings)


def run_module(*args: str, cwd: Path | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               GRADMODE_CACHE_DIR=str((cwd or ROOT) / ".gradmode_cache_test"))
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd or ROOT, capture_output=True, text=True,
                          errors="surrogateescape", env=env, input=input, timeout=300)  # a diff: the files' bytes


BIN = Path(sys.executable).parent


def run_script(name: str, *args: str, cwd: Path, input: str | None = None, **kwargs) -> subprocess.CompletedProcess:
    """Run an installed console script (``gradmode-lint``, ``gradmode-fix``: pip puts them beside the
    interpreter), as a user does, with its own cache folder and no NO_COLOR from the caller."""
    path = BIN / name
    assert path.exists(), f"{path} is missing: install the project (`pip install -e .`) first"
    env = dict(os.environ, GRADMODE_CACHE_DIR=str(cwd / ".cache-test"))
    env.pop("NO_COLOR", None)
    return subprocess.run([str(path), *args], cwd=cwd, capture_output=True, text=True, input=input, env=env,
                          timeout=300, **kwargs)


# -- a project's cache file (``lints/summary_cache.py``), read and written as a checkout could ---------------

def cache_rows(folder: Path) -> dict[str, list]:
    """path -> [key, summary] of each summary in the cache file of ``folder``."""
    import json
    import sqlite3

    with contextlib.closing(sqlite3.connect(Path(folder) / "cache.sqlite3")) as db:
        return {path.decode("utf-8", "surrogatepass"): [key, json.loads(text)]
                for path, key, text in db.execute("SELECT path, key, summary FROM summaries")}


def write_cache_rows(folder: Path, rows: dict[str, list]) -> None:
    """Replace every summary of the cache file of ``folder`` with ``rows`` (path -> [key, summary])."""
    import json
    import sqlite3

    from lints.summary_cache import row_words

    with contextlib.closing(sqlite3.connect(Path(folder) / "cache.sqlite3")) as db, db:
        db.execute("DELETE FROM summaries")
        texts = {path: json.dumps(summary) for path, (_, summary) in rows.items()}
        db.executemany("INSERT INTO summaries (path, key, words, summary) VALUES (?, ?, ?, ?)",
                       [(path.encode("utf-8", "surrogatepass"), key, row_words(texts[path]), texts[path])
                        for path, (key, _) in rows.items()])


def cache_fact(folder: Path, name: str):
    """The fact ``name`` ("format", "results") of the cache file of ``folder``, decoded; None if absent."""
    import json
    import sqlite3

    with contextlib.closing(sqlite3.connect(Path(folder) / "cache.sqlite3")) as db:
        row = db.execute("SELECT value FROM facts WHERE name = ?", (name,)).fetchone()
    return None if row is None else row[0] if name == "format" else json.loads(row[0])


def write_cache_fact(folder: Path, name: str, value) -> None:
    """Set (``None``: remove) the fact ``name`` of the cache file of ``folder``."""
    import json
    import sqlite3

    with contextlib.closing(sqlite3.connect(Path(folder) / "cache.sqlite3")) as db, db:
        db.execute("DELETE FROM facts WHERE name = ?", (name,))
        if value is not None:
            db.execute("INSERT INTO facts VALUES (?, ?)", (name, value if name == "format" else json.dumps(value)))
