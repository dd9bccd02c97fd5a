"""Installed libraries: the modules of the environment's site-packages that the project reaches.

An import that no project file provides is looked up in the site-packages of the environment: the
running interpreter's, or the one named by ``--python`` / ``python = "..."`` (a virtual environment's
interpreter or folder, or a site-packages folder), as pyright's ``pythonPath``. Nothing there is
executed, the interpreter included: its site-packages are found on disk, next to it. The modules the
project imports, then the modules of the same package that those import, are summarised like
project files and join the analysis, marked with the distribution they come from; only distributions
that require torch (their ``METADATA``) are read: no other can keep a torch tensor. Findings are
reported on the project's files only.

Summaries are cached per distribution, outside the project (the user's cache folder), under the
distribution's name, version and the digest of its ``RECORD``; a cache file is written only when
every module it holds matches the sha256 the ``RECORD`` lists for it, so a planted copy of a
distribution cannot poison the cache of the real one. A distribution with no ``RECORD`` (an
editable install) is summarised on every run.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import sys
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Optional

from .options import user_cache_root
from .summary_records import MODULE_SCOPE, records_or_none
from .writes import write_new_file

# Libraries whose facts the tool models itself (torch), or that hold no torch tensors or kernels
# that write through pointers: never summarised.
NOT_SUMMARISED = frozenset({"torch", "triton", "numpy", "setuptools", "pip", "_pytest", "pytest", "typing_extensions"})
# At most this many library modules in one run: beyond, the rest is left out with a warning.
MAX_MODULES = 6000
_CACHE_FORMAT = "gradmode-library/1"
# `Requires-Dist: torch`, `torch>=2.1`, `torch (>=2); extra == "gpu"`: any requirement of torch itself
_REQUIRES_TORCH = re.compile(r"^Requires-Dist:\s*torch\s*(?:[<>=!~;(\[]|$)", re.MULTILINE)


class Distribution(NamedTuple):
    name: str
    version: str
    record: Optional[str]  # path of its RECORD, None if it has none
    record_digest: str
    uses_torch: bool  # it requires torch (METADATA): only such a library can keep a torch tensor


class LibraryModule(NamedTuple):
    path: str
    module: str
    is_package: bool
    site: str
    distribution: Optional[Distribution]


class Environment:
    """The modules and distributions of a set of site-packages folders, looked up on demand."""

    def __init__(self, sites: list[str]) -> None:
        self.sites = sites
        self._owners: Optional[dict[tuple[str, str], Distribution]] = None
        self._modules: dict[str, Optional[LibraryModule]] = {}

    def module(self, dotted: str) -> Optional[LibraryModule]:
        """The file of module ``dotted`` (a package's ``__init__.py``), or None."""
        if dotted in self._modules:
            return self._modules[dotted]
        found = None
        parts = dotted.split(".")
        if all(p.isidentifier() for p in parts):
            for site in self.sites:
                base = os.path.join(site, *parts)
                for path, is_package in ((os.path.join(base, "__init__.py"), True), (base + ".py", False)):
                    if os.path.isfile(path):
                        found = LibraryModule(path, dotted, is_package, site, self.distribution(site, parts[0]))
                        break
                if found:
                    break
        self._modules[dotted] = found
        return found

    def distribution(self, site: str, top: str) -> Optional[Distribution]:
        if self._owners is None:
            self._owners = {}
            for folder in self.sites:
                try:
                    infos = sorted(n for n in os.listdir(folder) if n.endswith(".dist-info"))
                except OSError:
                    continue
                for info in infos:
                    self._read_dist_info(folder, info)
        return self._owners.get((site, top))

    def _read_dist_info(self, site: str, info: str) -> None:
        folder = os.path.join(site, info)
        name, _, version = info[: -len(".dist-info")].partition("-")
        tops: set[str] = set()
        record = os.path.join(folder, "RECORD")
        raw = _read_small(record)
        digest = hashlib.sha256(raw).hexdigest()[:16] if raw is not None else ""
        top_level = _read_small(os.path.join(folder, "top_level.txt"))
        if top_level is not None:
            tops.update(line.strip() for line in top_level.decode("utf-8", "replace").splitlines() if line.strip())
        elif raw is not None:
            for line in raw.decode("utf-8", "replace").splitlines():
                head = line.split("/", 1)[0].split(",", 1)[0]
                if head and not head.endswith((".dist-info", ".data")):
                    tops.add(head[:-3] if head.endswith(".py") else head)
        metadata = _read_small(os.path.join(folder, "METADATA"), 1 << 20) or b""
        uses_torch = _REQUIRES_TORCH.search(metadata.decode("utf-8", "replace")) is not None
        dist = Distribution(name, version, record if raw is not None else None, digest, uses_torch)
        for top in tops:
            self._owners.setdefault((site, top), dist)


def _read_small(path: str, limit: int = 64 << 20) -> Optional[bytes]:
    try:
        if os.path.getsize(path) > limit:
            return None
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


# which modules the project reaches ------------------------------------------------------
def imported_names(summary: dict) -> set[str]:
    """Every dotted module name a summary imports or calls through an import (in any scope)."""
    out: set[str] = set(summary.get("star", []))
    for fn in summary["functions"].values():
        table = fn.get("imports", {})
        out.update(table.values())
        if fn["qual"] == MODULE_SCOPE or table:
            for call in fn.get("calls", []):
                func = call[0]
                if func[0] == "n" and "." in func[1]:
                    head, _, rest = func[1].partition(".")
                    if head in table:
                        out.add(f"{table[head]}.{rest}")
    return out


def _candidates(dotted: str) -> Iterable[str]:
    """``a.b.c`` may be module ``a.b.c``, or a name in module ``a.b``, ...; each needs the packages above."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        yield ".".join(parts[:end])


def reached_modules(project_summaries: Iterable[dict], env: Environment, project_modules: set[str]
                    ) -> tuple[list[LibraryModule], Callable[[Iterable[dict]], list[LibraryModule]]]:
    """The library modules the project imports directly, and a function giving the next wave from new
    summaries (the imports of the packages the project reached, not of other distributions)."""
    wanted_tops: set[str] = set()
    seen: set[str] = set()

    def wave(summaries: Iterable[dict], first: bool) -> list[LibraryModule]:
        out: list[LibraryModule] = []
        for summary in summaries:
            for dotted in imported_names(summary):
                top = dotted.split(".", 1)[0]
                if top in NOT_SUMMARISED or top in sys.stdlib_module_names or top in project_modules:
                    continue
                if not first and top not in wanted_tops:
                    continue  # a library's own imports of other distributions are not followed
                for candidate in _candidates(dotted):
                    if candidate in seen:
                        continue
                    seen.add(candidate)
                    module = env.module(candidate)
                    if module is None or module.distribution is None or not module.distribution.uses_torch:
                        continue  # a library that does not require torch keeps no tensor (nor one we can tell)
                    if first:
                        wanted_tops.add(top)
                    out.append(module)
        return out

    return wave(project_summaries, True), (lambda summaries: wave(summaries, False))


# the cache ---------------------------------------------------------------------------------
def user_cache_folder() -> Optional[Path]:
    root = user_cache_root()
    return root / "libraries" if root is not None else None


class LibraryCache:
    """module name -> summary, one JSON file per distribution (name, version, RECORD digest, tool)."""

    def __init__(self, folder: Optional[Path], tool_key: str) -> None:
        self.folder = folder
        self.tool_key = tool_key
        self._loaded: dict[Distribution, dict[str, dict]] = {}
        self._dirty: set[Distribution] = set()

    def _file(self, dist: Distribution) -> Optional[Path]:
        if self.folder is None or dist.record is None:
            return None
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{dist.name}-{dist.version}-{dist.record_digest}")
        return self.folder / f"{name}.json"

    def get(self, module: LibraryModule) -> Optional[dict]:
        dist = module.distribution
        if dist is None:
            return None
        if dist not in self._loaded:
            self._loaded[dist] = self._read(dist)
        summary = self._loaded[dist].get(module.module)
        if summary is None:
            return None
        return records_or_none({**summary, "path": module.path})

    def _read(self, dist: Distribution) -> dict[str, dict]:
        path = self._file(dist)
        if path is None:
            return {}
        try:
            if path.is_symlink() or path.stat().st_size > 1 << 30:
                return {}
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != f"{_CACHE_FORMAT}/{self.tool_key}":
            return {}
        modules = data.get("modules")
        if not isinstance(modules, dict):
            return {}
        return {name: s for name, s in modules.items() if isinstance(s, dict) and isinstance(s.get("functions"), dict)
                and isinstance(s.get("classes"), dict) and s.get("module") == name}

    def put(self, module: LibraryModule, summary: dict) -> None:
        dist = module.distribution
        if dist is None or dist.record is None or not _matches_record(module, dist):
            return
        if dist not in self._loaded:
            self._loaded[dist] = self._read(dist)
        self._loaded[dist][module.module] = summary
        self._dirty.add(dist)

    def save(self) -> None:
        if self.folder is None:
            return
        for dist in self._dirty:
            path = self._file(dist)
            if path is None:
                continue
            modules = {name: {k: v for k, v in s.items() if k != "path"} for name, s in self._loaded[dist].items()}
            data = json.dumps({"format": f"{_CACHE_FORMAT}/{self.tool_key}", "modules": modules},
                              separators=(",", ":"))
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                write_new_file(str(path), data.encode("utf-8"))
            except OSError:
                continue  # a cache that cannot be written costs time, not results
        self._dirty.clear()


_RECORDS: dict[str, dict[str, str]] = {}


def _matches_record(module: LibraryModule, dist: Distribution) -> bool:
    """Whether the file's sha256 is the one its distribution's RECORD lists (else it is not cached)."""
    if dist.record is None:
        return False
    hashes = _RECORDS.get(dist.record)
    if hashes is None:
        hashes = {}
        raw = _read_small(dist.record)
        if raw is not None:
            for row in csv.reader(io.StringIO(raw.decode("utf-8", "replace"))):
                if len(row) >= 2 and row[1].startswith("sha256="):
                    hashes[row[0]] = row[1][len("sha256="):]
        _RECORDS[dist.record] = hashes
    relative = os.path.relpath(module.path, module.site).replace(os.sep, "/")
    expected = hashes.get(relative)
    data = _read_small(module.path)
    if expected is None or data is None:
        return False
    actual = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return actual == expected


# the whole step ------------------------------------------------------------------------------
def library_summaries(project_summaries: list[dict], sites: list[str], cache: LibraryCache,
                      summarise: Callable[[list[LibraryModule]], dict[str, object]]) -> tuple[list[dict], list[str]]:
    """Summaries of the library modules the project reaches (``summarise``: path -> summary or FileError
    for the modules not cached), each marked with ``library``; and warnings for the run's stderr."""
    env = Environment(sites)
    project_modules = {s["module"].split(".", 1)[0] for s in project_summaries}
    todo, next_wave = reached_modules(project_summaries, env, project_modules)
    warnings: list[str] = []
    out: list[dict] = []
    count = 0
    while todo:
        if count + len(todo) > MAX_MODULES:
            warnings.append(f"more than {MAX_MODULES} library modules reached: the rest are left out")
            todo = todo[: max(0, MAX_MODULES - count)]
        count += len(todo)
        new: list[dict] = []
        missing: list[LibraryModule] = []
        for module in todo:
            cached = cache.get(module)
            if cached is not None:
                new.append(cached)
            else:
                missing.append(module)
        if missing:
            results = summarise(missing)
            for module in missing:
                result = results.get(module.path)
                if isinstance(result, dict):
                    cache.put(module, result)
                    new.append(result)
        by_name = {m.module: m for m in todo}
        for summary in new:
            module = by_name[summary["module"]]
            summary["library"] = module.distribution.name if module.distribution is not None else "site-packages"
            summary["shown_path"] = os.path.relpath(module.path, module.site)
        out.extend(new)
        todo = next_wave(new) if count < MAX_MODULES else []
    cache.save()
    return out, warnings
