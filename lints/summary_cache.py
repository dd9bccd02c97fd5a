"""The cache of a project: every file's summary by path and content hash, and the findings of the last
run over exactly these files and settings, as JSON in ``.gradmode_cache`` (or ``--cache-dir``)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Union

from . import __version__
from .child_processes import in_forked_child
from .gc_pause import collector_paused
from .gitignore import rules_at
from .model import FileError, Finding
from .options import user_cache_root
from .sources import read_regular_bytes
from .summary_records import SCHEMA, with_records
from .walk import discover
from .warn import warn


def _tool_fingerprint() -> str:
    """The tool's own files (size, mtime): an edited checkout of the tool never reuses stale results."""
    folder = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.blake2b(digest_size=8)
    for path in discover([folder], ("__pycache__",), respect_gitignore=False)[0]:
        st = os.stat(path)
        h.update(f"{os.path.basename(path)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


# The interpreter too: its `ast` decides what parses (tox runs several on one checkout).
CACHE_FORMAT = (f"gradmode-summaries/{SCHEMA}/{__version__}/{_tool_fingerprint()}/"
                f"{sys.implementation.name}-{sys.version_info.major}.{sys.version_info.minor}")


_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# A cache file larger than this is no cache of ours (sglang's summaries are about 50 MB).
MAX_CACHE_BYTES = 1 << 30
# What a project's cache files may hold per byte of its source (summaries took 1.2 bytes a byte on
# torch's nn and _dynamo: 8.2 MB for 6.7 MB), and beyond that (findings and their chains).
CACHE_BYTES_PER_SOURCE_BYTE = 32
CACHE_SLACK_BYTES = 16 << 20


class SummaryCache:
    """Summaries by path and content hash, as JSON (never pickle: a checkout may be hostile).

    ``summaries.json`` holds them all. A run that changes only a few writes just those to
    ``summaries-changes.json``, which names the ``summaries.json`` it amends (rewriting 50 MB of
    summaries after a one-line edit of sglang took 1 s of CPU and slowed the analysis beside it);
    past ``CHANGES_LIMIT`` changed files, or 5% of them, the whole file is written again and the
    changes file is removed once it is. An unreadable, corrupt or foreign file is empty, changes to
    another ``summaries.json`` are ignored, and a stale entry (other content) is a miss.
    """

    # Changed files a run may add to summaries-changes.json: at least this many, or 5% of the files.
    CHANGES_LIMIT = 64
    # Fewer summaries to encode than this are written in process: a fork cost more (400 projects of
    # 6 files each: 1.5 s of the run went to forking and waiting for the writers).
    BACKGROUND_MIN_ENTRIES = 256

    def __init__(self, folder: Optional[Path]) -> None:
        self.folder = Path(folder) if folder is not None else None
        self.path = self.folder / "summaries.json" if self.folder is not None else None
        self.changes_path = self.folder / "summaries-changes.json" if self.folder is not None else None
        self._entries: Optional[dict[str, list]] = None
        self._base: Optional[str] = None  # the id of the summaries.json read
        self._changed: set[str] = set()  # paths whose entry differs from that file's
        self._texts: dict[str, str] = {}  # path -> its summary as JSON text, where a worker encoded it
        self._dirty = False
        self.reused = 0  # summaries this run took from the cache
        self.max_file_bytes = MAX_CACHE_BYTES  # a larger file is not read (``limit_to_sources``)

    def limit_to_sources(self, source_bytes: int) -> None:
        """Read no file larger than what the project's ``source_bytes`` of source can produce: a larger
        one is no cache of this project (a checkout may ship a sparse file of 1 GiB: read whole, it cost
        2.4 GB and 26 s on a 2-file project), so it is absent, and written again."""
        self.max_file_bytes = min(MAX_CACHE_BYTES, CACHE_BYTES_PER_SOURCE_BYTE * source_bytes + CACHE_SLACK_BYTES)

    def _load(self) -> dict[str, list]:
        if self._entries is None:
            data = _read_json(self.path, self.max_file_bytes) if self.path is not None else {}
            if not isinstance(data.get("entries"), dict):
                data = {"entries": {}}
            self._entries = data["entries"]
            self._base = data.get("id") if isinstance(data.get("id"), str) else None
            if self._base is not None:
                changes = _read_json(self.changes_path, self.max_file_bytes)
                if changes.get("base") == self._base and isinstance(changes.get("entries"), dict):
                    for path, entry in changes["entries"].items():
                        if entry is None:
                            self._entries.pop(path, None)
                        else:
                            self._entries[path] = entry
                        self._changed.add(path)
        return self._entries

    def results(self, digest: str) -> Optional[dict]:
        """The findings of a run over exactly these files, config and tool version, if cached."""
        if self.folder is None:
            return None
        data = _read_json(self.folder / "results.json", self.max_file_bytes)
        return data if data.get("digest") == digest and isinstance(data.get("findings"), list) else None

    def save_results(self, digest: str, findings: list[Finding], errors: dict[str, FileError], serving) -> None:
        if self.folder is None:
            return
        data = {"format": CACHE_FORMAT, "digest": digest, "findings": [f.to_dict() for f in findings],
                "errors": {p: e.message for p, e in errors.items()}, "serving": list(serving)}
        self._write(self.folder / "results.json", data)

    def is_empty(self) -> bool:
        """Nothing saved yet (without reading it: the summaries are tens of MB on a big tree)."""
        return self.folder is None or not (self.path.is_file() or (self.folder / "results.json").is_file())

    def get(self, path: str, key: str) -> Optional[dict]:
        entry = self._load().get(path)
        if (isinstance(entry, list) and len(entry) == 2 and entry[0] == key and isinstance(entry[1], dict)
                and entry[1].get("schema") == SCHEMA and entry[1].get("path") == path and _well_shaped(entry[1])):
            return with_records(entry[1])
        return None

    def forget(self) -> None:
        """Drop every entry read: the run summarises each file afresh and rewrites the whole file."""
        self._entries, self._base, self._changed, self.reused = {}, None, set(), 0
        self._texts = {}

    def put(self, path: str, key: str, summary: dict, text: Optional[str] = None) -> None:
        """Record ``summary``; ``text``, its JSON encoding, where it was made already."""
        self._load()[path] = [key, summary]
        if text is not None:
            self._texts[path] = text
        else:
            self._texts.pop(path, None)
        self._changed.add(path)
        self._dirty = True

    def prune(self, live: Iterable[str]) -> None:
        live = set(live)
        entries = self._load()
        for path in [p for p in entries if p not in live]:
            del entries[path]
            self._texts.pop(path, None)
            self._changed.add(path)
            self._dirty = True

    def save(self, background: bool = False) -> Callable[[], None]:
        """Write the summaries if any changed; returns the wait for the write. A few changes go to
        summaries-changes.json. Otherwise they are all written: the summaries workers handed back
        are JSON text already (``put``'s ``text``), and the rest are encoded here or, with
        ``background`` and many of them, by a forked child while this process analyses (on sglang
        0.5.15 encoding them all takes 0.7 s, as long as the analysis; the child's copy-on-write
        pages slowed the analysis beside it by a third)."""
        if self.path is None or not self._dirty:
            return _nothing
        self._dirty = False
        entries = self._load()
        if self._base is not None and len(self._changed) <= max(self.CHANGES_LIMIT, len(entries) // 20):
            self._write(self.changes_path, {"format": CACHE_FORMAT, "base": self._base,
                                            "entries": {p: entries.get(p) for p in sorted(self._changed)}})
            return _nothing
        self._base, self._changed = os.urandom(8).hex(), set()
        texts = self._texts
        to_encode = len(entries) - len(texts)
        background = background and to_encode > 0 and to_encode >= self.BACKGROUND_MIN_ENTRIES
        wait = in_forked_child(lambda: self._write_all(entries, texts)) if background else None
        if wait is None:
            self._write_all(entries, texts)
        self._texts = {}  # written (46 MB on sglang 0.5.15): they no longer match what a later change puts
        return wait or _nothing

    def _write_all(self, entries: dict, texts: dict[str, str]) -> None:
        def pieces() -> Iterator[str]:
            yield f'{{"format":{encode_json(CACHE_FORMAT)},"id":{encode_json(self._base)},"entries":{{'
            for n, (path, entry) in enumerate(entries.items()):
                text = texts.get(path)
                value = encode_json(entry) if text is None else f"[{encode_json(entry[0])},{text}]"
                yield f'{"," if n else ""}{encode_json(path)}:{value}'
            yield "}}"

        # The changes name the summaries.json replaced: once it is, they are dead. Until then (a
        # write that fails) they still amend the file on disk.
        if self._write(self.path, pieces()):
            try:
                self.changes_path.unlink()
            except OSError:
                pass

    def _write(self, target: Path, data: Union[dict, Iterator[str]]) -> bool:
        """Write ``data`` (or the JSON text it yields) to ``target`` whole or not at all; whether it was written."""
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            ignore_in_git(target.parent)
            pieces = [encode_json(data)] if isinstance(data, dict) else data
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-cache-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.writelines(pieces)
                os.replace(tmp, target)
                return True
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as exc:  # a read-only checkout still lints
            warn(f"cannot write cache {target}: {exc.strerror or exc}")
            return False
        except (ValueError, RecursionError) as exc:  # a summary JSON cannot hold: the run goes on without a cache
            warn(f"cannot write cache {target}: {type(exc).__name__}: {exc}")
            return False


def encode_json(data) -> str:
    """Our JSON: one C-encoder call (json.dump is ~10x slower); the data is ours and acyclic, and not
    tracking every list for cycles takes a quarter off (sglang 0.5.15: 0.66 s against 0.87 s)."""
    return json.dumps(data, separators=(",", ":"), check_circular=False)


def _read_json(path: Path, max_bytes: int = MAX_CACHE_BYTES) -> dict:
    """A cache file's data; anything unreadable, corrupt or foreign is empty (a miss, never an error).

    The cache folder is the checkout's: only a regular file is read, and not through a link, since
    a FIFO there would block the run and a link to /dev/zero would never end.
    """
    try:
        raw = read_regular_bytes(path, max_bytes, follow_links=False)
        with collector_paused():  # tens of MB of summaries: with it on, decoding took 4.6 s, not 0.8 s
            data = json.loads(raw)
    except (OSError, ValueError, RecursionError, MemoryError):
        return {}
    return data if isinstance(data, dict) and data.get("format") == CACHE_FORMAT else {}


def _well_shaped(summary: dict) -> bool:
    """Whether a cached summary's fields have the types a fresh one's have. The records inside are not
    checked (too slow on a 50 MB cache): an analysis that fails on one is rerun without the cache."""
    return (isinstance(summary.get("module"), str) and isinstance(summary.get("package"), bool)
            and isinstance(summary.get("star"), list)
            and all(isinstance(summary.get(field), dict) and all(isinstance(v, dict) for v in summary[field].values())
                    for field in ("functions", "classes")))


def _nothing() -> None:
    pass


def cache_folder(root: str, cache_dir: Optional[Path], loose: bool = False) -> Optional[Path]:
    """Where the cache of the project at ``root`` lives: a folder of its own in ``cache_dir`` (named
    by the root's path, as ruff does: projects sharing one cache folder prune each other's
    summaries otherwise), else ``project_cache_folder``; loose files have none of their own."""
    if cache_dir is not None:
        name = hashlib.sha256(os.path.abspath(root).encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return Path(cache_dir) / name
    return None if loose else project_cache_folder(root)


def markerless_cache_folder(folder: str, packages: Iterable[str]) -> Optional[Path]:
    """The cache of packages without a project marker (an unzipped sdist, a copied tree), analysed in
    ``folder``: in the user's cache folder, since ``folder`` may be ``/tmp`` or a home folder, one per
    folder and set of packages (as ``cache_folder`` names a project's)."""
    root = user_cache_root()
    if root is None:
        return None
    key = "|".join([os.path.abspath(folder), *sorted(os.path.abspath(p) for p in packages)])
    return root / "projects" / hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def project_cache_folder(root: str) -> Optional[Path]:
    """A project's own cache folder, ``<root>/.gradmode_cache``; None (with a warning, once) where that
    is a symbolic link (a checkout may point it anywhere) or a folder git tracks (a cache the checkout
    ships, made to pass for ours): nothing is read or written there."""
    folder = Path(root) / ".gradmode_cache"
    if folder.is_symlink():
        why = "it is a symbolic link"
    elif folder.is_dir() and _tracked_by_git(folder):
        why = "git tracks it (a cache shipped with the checkout is not trusted)"
    else:
        return folder
    if str(folder) not in _refused_caches_reported:
        _refused_caches_reported.add(str(folder))
        warn(f"not using cache {folder}: {why}")
    return None


def ignore_in_git(folder: Path) -> None:
    """Give a cache folder a ``.gitignore`` of ``*`` (as ruff does), unless it has one; raises OSError."""
    try:  # O_EXCL: never through a link there, dangling or not
        fd = os.open(folder / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0), 0o666)
    except FileExistsError:
        return  # ours, the user's or a link: left as it is
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("# Created by gradmode-lint\n*\n")


_refused_caches_reported: set[str] = set()
_tracked: dict[str, bool] = {}  # folder -> _tracked_by_git(folder), once per process


def _tracked_by_git(folder: Path) -> bool:
    """Whether git tracks anything in ``folder``: ``git ls-files --error-unmatch`` (about 5 ms), asked
    only inside a git checkout and once per process; False where git is missing or cannot tell (a
    repository of another user's, which git refuses). The checkout's own configuration cannot make
    git run a command of its (``core.fsmonitor`` is set off on the command line, which wins)."""
    key = str(folder)
    if key not in _tracked:
        git = shutil.which("git")
        _tracked[key] = False
        if git is not None and rules_at(key) is not None:  # rules_at: None outside any checkout
            env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
            env["GIT_OPTIONAL_LOCKS"] = "0"
            try:
                _tracked[key] = subprocess.run(
                    [git, "--literal-pathspecs", "-c", "core.fsmonitor=false", "ls-files", "--error-unmatch",
                     "--", folder.name], cwd=folder.parent, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, env=env, timeout=30).returncode == 0
            except (OSError, subprocess.SubprocessError):
                pass
    return _tracked[key]
