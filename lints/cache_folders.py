"""Where a project's cache lives: its own folder in the project (``.gradmode_cache``) unless that is a link or
a folder git tracks, a folder per project in ``--cache-dir``, or the user's cache folder for packages without
a marker; and the ``.gitignore`` a cache folder gets."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, Optional

from .gitignore import rules_at
from .options import user_cache_root
from .warn import warn

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


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
    if os.path.abspath(folder) not in _refused_caches_reported:  # once, however the root is spelt
        _refused_caches_reported.add(os.path.abspath(folder))
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
    key = os.path.abspath(folder)  # however the root is spelt
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
