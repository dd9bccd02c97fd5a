"""Walking folders for Python files: iteratively (a tree 1,000 deep exhausts ``os.walk``'s recursion),
not into symlinked folders, leaving out what ``exclude`` names and what git ignores (``lints.gitignore``),
and stopping at the projects below (``stop_at``); a folder walked once per run (``walks_shared``)."""
from __future__ import annotations

import contextlib
import functools
import os
import stat
import time
from typing import Callable, Collection, Iterable, Iterator, NamedTuple, Optional, Sequence

from . import gitignore
from .globs import as_glob_path, bare_names, path_matcher, relative_inside, relative_to
from .model import FileError
from .sources import NOT_REGULAR, is_regular_file


def _excluded(name: str, full: str, exclude: tuple[str, ...], anchor: str) -> bool:
    return bool(exclude) and _exclusion(exclude)(name, relative_to(full, anchor))


@functools.lru_cache(maxsize=64)
def _exclusion(exclude: tuple[str, ...]) -> Callable[[str, str], bool]:
    """``excluded(name, path counted from the anchor)``: whether ``exclude`` names the path, or the name alone
    (``./build`` is no name: the top one only)."""
    by_path = path_matcher(exclude)
    by_name = path_matcher(tuple(p for p in exclude if "/" not in p))
    return lambda name, relative: by_path(relative) or by_name(name)


def excluded_below(path: str, root: str, exclude: Iterable[str], anchor: str = "",
                   respect_gitignore: bool = True) -> bool:
    """Whether a walk from ``root`` would skip ``path`` by name: it or a folder between them is excluded
    (``anchor``: the folder ``exclude``'s paths are counted from, ``Config.root``), or ignored by git
    (``respect_gitignore``)."""
    exclude = tuple(exclude)
    top = os.path.abspath(root)
    parts = os.path.relpath(os.path.abspath(path), top).split(os.sep)
    if any(_excluded(part, os.path.join(root, *parts[:i + 1]), exclude, anchor) for i, part in enumerate(parts)):
        return True
    if not respect_gitignore or parts[0] in (os.curdir, os.pardir):
        return False
    rules, folder = gitignore.rules_at(top), top
    for i, part in enumerate(parts):
        full = os.path.join(folder, part)
        last = i == len(parts) - 1
        if gitignore.is_ignored(rules, folder, part, not last or os.path.isdir(full)):
            return True
        if not last:
            rules = gitignore.rules_entering(full, rules, gitignore.markers_in(full))
        folder = full
    return False


def discover(paths: Sequence[str], exclude: Iterable[str], stop_at: Optional[StopAt] = None, anchor: str = "",
             respect_gitignore: bool = True) -> tuple[list[str], list[FileError]]:
    """Python files under ``paths``; explicitly named files are taken as they are.

    Directory walks do not follow symlinked folders (no loops), skip excluded names (``anchor``: the
    folder the paths in ``exclude`` are counted from, ``Config.root``; "": from the paths as given) and,
    with ``respect_gitignore``, what git ignores (``lints.gitignore``), and leave out a folder below a
    path given for which ``stop_at(folder, its entries' names)`` is true. Paths a walk finds are
    spelt as ``os.path.normpath`` spells them (``a.py``, never ``./a.py``), as errors are.
    """
    exclude = tuple(exclude)
    files: list[str] = []
    errors: list[FileError] = []
    # a remembered walk's files are the same while its listings are (a file's type cannot change in place)
    key = ("discover", tuple(paths), os.getcwd(), exclude, stop_at, anchor, respect_gitignore)
    listings = [_listing(given, exclude, stop_at, anchor, respect_gitignore) if os.path.isdir(given) else given
                for given in paths] if _remembered is not None else None
    if listings is not None and key in _remembered:
        used, found = _remembered[key]
        if len(used) == len(listings) and all(a is b for a, b in zip(used, listings)):
            return list(found[0]), list(found[1])

    for index, given in enumerate(paths):
        if os.path.isdir(given):
            walked = listings[index][0] if listings is not None and isinstance(listings[index], tuple) else \
                _walk(given, exclude, stop_at, anchor, respect_gitignore)
            for folder in walked:
                root = os.path.normpath(folder.root)
                root = "" if root == os.curdir else root  # `a.py`, not `./a.py`
                prefix = os.path.join(root, "")  # what ``os.path.join(root, name)`` puts before each name
                files += [prefix + name for name in folder.files]
                for name in folder.unusual:
                    full = os.path.join(root, name)
                    if is_regular_file(full) is False:  # a FIFO would block the run; a broken link
                        errors.append(FileError(full, NOT_REGULAR))  # reports its own error later
                    else:
                        files.append(full)
        elif os.path.lexists(given):
            files.append(given)  # a broken link or unreadable file reports its own error
        else:
            errors.append(FileError(os.path.normpath(given), "no such file or directory"))
    found = sorted(dict.fromkeys(files)), errors
    if listings is not None and all(isinstance(listing, tuple) for listing in listings):  # no file given by name
        _remembered[key] = (listings, found)
    return list(found[0]), list(found[1])


# (folder, the names of its entries) -> whether a walk leaves that folder out
StopAt = Callable[[str, Collection[str]], bool]


def stopping_points(folder: str, exclude: Iterable[str], stop_at: StopAt, anchor: str = "",
                    respect_gitignore: bool = True) -> list[str]:
    """The folders below ``folder`` that ``discover``'s walk from it leaves out (``stop_at``)."""
    return _listing(folder, tuple(exclude), stop_at, anchor, respect_gitignore)[1]


def _walk(folder: str, exclude: tuple[str, ...], stop_at: Optional[StopAt] = None, anchor: str = "",
          respect_gitignore: bool = True) -> Iterator["FolderListing"]:
    """The folders under ``folder`` and their Python files, not into symlinked, excluded or ignored folders (a
    walk never enters a link, so ``stop_at`` is asked only of real folders, once each)."""
    return iter(_listing(folder, exclude, stop_at, anchor, respect_gitignore)[0])


class FolderListing(NamedTuple):
    """A folder a walk listed: its Python files that no exclude or ignore rule leaves out, sorted."""

    root: str  # spelt from the folder the walk started at
    files: list[str]  # regular files, as the listing's entry types tell (no stat of each)
    unusual: list[str]  # links, FIFOs, sockets, devices: each looked at when the walk's files are taken


Listing = tuple[list[FolderListing], list[str]]  # the folders walked; the folders left out
_shared_listings: Optional[dict[tuple, Listing]] = None
_remembered: Optional[dict[tuple, tuple[list, Listing]]] = None


@contextlib.contextmanager
def walks_remembered(memo: dict) -> Iterator[None]:
    """Within this block a walk is taken from ``memo`` (kept by a long-lived process: the language server)
    while every folder it listed, and every file in them that decides what it leaves out (``.gitignore``,
    ``.git``, ``pyproject.toml``), and in the folders above it, is as it was: a folder's times change when
    an entry is added, removed or renamed in it."""
    global _remembered
    outer, _remembered = _remembered, memo
    try:
        yield
    finally:
        _remembered = outer


# the names in a folder that decide what a walk leaves out: git's ignore files, checkout and settings markers
_DECIDING = (".gitignore", ".git", os.path.join(".git", "info", "exclude"), "pyproject.toml")
# A stamp younger than this is not trusted: an edit within the file system's clock resolution would not move it.
RACY_NANOSECONDS = 2_000_000_000


def settled(mtime_ns: int, ctime_ns: int) -> bool:
    """Whether a file's or folder's times are old enough for its stamp to stand for it (as git does with
    "racily clean" files: an edit made right after it was read could leave the times as they were)."""
    return max(mtime_ns, ctime_ns) < time.time_ns() - RACY_NANOSECONDS


def _stamp(st: os.stat_result) -> tuple:
    """What a kept walk holds of a folder or a deciding file: its times, inode, size and mode."""
    return st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_size, st.st_mode


# what ``_stamps`` takes of each folder, in its order: the folder itself, then its deciding files
_DECIDING_STAMPS = ("", *_DECIDING)
# for each of them, which one's presence makes it worth a look in a folder walked (``_unchanged``): a deciding file
# created since would have moved its folder's times, but not ``.git/info/exclude`` created inside ``.git``
_SHOWN_BY = tuple(_DECIDING_STAMPS.index(name.split(os.sep)[0]) for name in _DECIDING_STAMPS)


def _stamps(folders: Sequence[str], above: int = 0) -> Optional[tuple]:
    """The stamps of ``folders`` and of their deciding files (None for one absent); None where any is too
    recent to be trusted or cannot be read. The last ``above`` folders are above the walk: only their deciding files
    count (a home folder's or ``/tmp``'s times move all day), so their own stamps are None."""
    stamps: list[Optional[tuple]] = []
    for index, folder in enumerate(folders):
        for name in _DECIDING_STAMPS:
            if not name and index >= len(folders) - above:
                stamps.append(None)
                continue
            try:
                st = os.lstat(os.path.join(folder, name) if name else folder)
            except (FileNotFoundError, NotADirectoryError):  # `.git` a file (a worktree's): no info/exclude
                stamps.append(None)
                continue
            except OSError:
                return None
            # a link's stamp is not its target's (a pyproject.toml or .gitignore is read through it)
            if not settled(st.st_mtime_ns, st.st_ctime_ns) or stat.S_ISLNK(st.st_mode):
                return None
            stamps.append(_stamp(st))
    return tuple(stamps)


def _unchanged(folders: list[str], stamps: tuple, above: int = 0) -> bool:
    """Whether ``_stamps(folders, above)`` would still be ``stamps`` (each of which was settled when taken), looking
    only at what can change unseen: each folder walked, and each deciding file it held (``_SHOWN_BY``); in a folder
    above the walk, each deciding file."""
    width = len(_DECIDING_STAMPS)
    if len(stamps) != len(folders) * width:
        return False
    for index, folder in enumerate(folders):
        held = stamps[index * width:(index + 1) * width]
        walked = index < len(folders) - above
        for name, was, shown_by in zip(_DECIDING_STAMPS, held, _SHOWN_BY):
            if not (name or walked) or walked and name and held[shown_by] is None:
                continue
            try:
                st = os.lstat(os.path.join(folder, name) if name else folder)
            except (FileNotFoundError, NotADirectoryError):
                if was is not None:
                    return False
                continue
            except (OSError, ValueError):  # a name no file system holds (a NUL, a lone surrogate)
                return False
            if was != _stamp(st):
                return False
    return True


def _named(stop_at: Optional[StopAt]) -> object:
    """How a walk's key names ``stop_at``: a function of a module by its module and name (as a walk kept in a file
    names it), anything else as itself."""
    qualname = getattr(stop_at, "__qualname__", "")
    module = getattr(stop_at, "__module__", None)
    if isinstance(module, str) and qualname and "<" not in qualname and "." not in qualname:
        return f"{module}:{qualname}"
    return stop_at


# The walks kept between runs, in the project's cache folder (``walks_kept_in``).
WALKS_FILE = "walks.json"
_WALKS_FORMAT = "gradmode-walks/2"
_MAX_WALKS_BYTES = 64 << 20


@contextlib.contextmanager
def walks_kept_in(path: Optional[str], tool: str = "") -> Iterator[None]:
    """Within this block a walk is taken from those an earlier run kept in ``path`` while every folder it listed is
    as it was (``walks_remembered``: 2 ms on sglang's 481 folders, where walking them took 15), and the block's
    walks are kept there after it. Nothing is read or kept where ``path`` is None or a memo is in use already (the
    language server's), and a file another version of the tool (``tool``) wrote is not read. ``path`` is the
    project's to plant: it is read as JSON of one shape only, and a walk it holds stands only where each folder it
    lists, and the folders above, have the times, inode and mode it says."""
    if path is None or _remembered is not None:
        yield
        return
    memo = _UsedFirst(_read_walks(path, tool))
    kept = dict(memo)
    with walks_remembered(memo):
        yield
    keep = _kept_apart(memo)
    if keep.keys() != kept.keys() or any(keep[key] is not kept[key] for key in kept):  # (not for the order alone)
        _write_walks(path, keep, tool)


# At most this many walks are kept, those of the latest runs (a walk of each folder given apart from the project's,
# each exclude setting): sglang's whole walk is 0.2 MB.
MAX_KEPT_WALKS = 4


class _UsedFirst(dict):
    """A memo that tells which walks a run asked for (``used``, in that order)."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.used: dict = {}

    def __contains__(self, key) -> bool:
        self.used[key] = None
        return super().__contains__(key)

    def __setitem__(self, key, value) -> None:
        self.used[key] = None
        super().__setitem__(key, value)


def _kept_apart(memo: _UsedFirst) -> dict:
    """The walks of ``memo`` a file can keep (those whose key names everything by text: ``_named``), the ones this run
    asked for first, at most ``MAX_KEPT_WALKS``."""
    order = [key for key in memo.used if dict.__contains__(memo, key)] + [key for key in memo if key not in memo.used]
    keepable = [key for key in order if key[0] != "discover" and isinstance(key[3], (str, type(None)))]
    return {key: memo[key] for key in keepable[:MAX_KEPT_WALKS]}


def _read_walks(path: str, tool: str) -> dict:
    """The walks kept in ``path`` by this version of the tool (``tool``), each checked whole: {} for a file of any
    other shape (the project's to plant), or of another version."""
    import json

    from .sources import read_regular_bytes

    try:
        data = json.loads(read_regular_bytes(path, _MAX_WALKS_BYTES, follow_links=False))
        if not (isinstance(data, dict) and data.get("format") == _WALKS_FORMAT and data.get("tool") == tool
                and isinstance(data.get("walks"), list)):
            return {}
        memo = {}
        for key, stamps, walked, stopped, unlisted in data["walks"]:
            top, folder, exclude, stop_at, anchor, respect = key
            listings = [FolderListing(root, files, unusual) for root, files, unusual in walked]
            names = [name for listed in listings for name in (*listed.files, *listed.unusual)]
            roots = [listed.root for listed in listings]
            "".join([top, folder, *exclude, stop_at or "", anchor, *stopped, *unlisted, *roots])  # TypeError
            if not (isinstance(respect, bool) and os.path.isabs(top) and os.path.abspath(folder) == top
                    and all(_is_stamp(stamp) for stamp in stamps) and _are_names(names)):
                return {}
            seen = _seen_by(top, folder, roots, stopped, unlisted, stamps)
            if seen is None:
                return {}
            stamps = tuple(tuple(stamp) if stamp is not None else None for stamp in stamps)
            memo[(top, folder, tuple(exclude), stop_at, anchor, respect)] = ((seen, stamps), (listings, stopped))
        return memo
    except (OSError, ValueError, TypeError, RecursionError, MemoryError):  # absent, or of another shape
        return {}


def _seen_by(top: str, folder: str, roots: list[str], stopped: list[str], unlisted: list[str], stamps: list
             ) -> Optional[list[str]]:
    """The folders a kept walk's stamps are of (those it walked, stopped at and could not list, then the folders
    above), where it is one ``_listing`` could have made from ``folder`` (absolute: ``top``): it began there, each
    folder it walked or stopped at lies in one it walked before (so none is reached through a link), and each walked
    folder's stamp is a folder's; None for any other, ValueError for a folder named otherwise."""
    if not roots or roots[0] != folder:
        return None
    walked = [_folder_below(top, folder, root) for root in roots]
    at_walk = [_folder_below(top, folder, root) for root in stopped]
    earlier = {walked[0]}
    for path in walked[1:]:
        if os.path.dirname(path) not in earlier:
            return None
        earlier.add(path)
    if any(os.path.dirname(path) not in earlier for path in [*at_walk, *unlisted]):
        return None
    seen = walked + at_walk + unlisted + _above(top)
    width = len(_DECIDING_STAMPS)
    if len(stamps) != len(seen) * width or not all(
            stamps[i * width] is not None and stat.S_ISDIR(stamps[i * width][4]) for i in range(len(walked))):
        return None
    return seen


def _is_stamp(stamp: object) -> bool:
    return stamp is None or (isinstance(stamp, list) and len(stamp) == 5 and all(type(n) is int for n in stamp))


def _are_names(names: list[str]) -> bool:
    """Whether each of ``names`` (texts) names an entry of a folder: no separator in it, nor ``.`` or ``..``."""
    joined = "\0".join(names)
    return {"", os.curdir, os.pardir}.isdisjoint(names) and os.sep not in joined and (
        os.altsep is None or os.altsep not in joined)


def _folder_below(top: str, folder: str, root: str) -> str:
    """The absolute path of ``root``, a folder a walk from ``folder`` (absolute: ``top``) listed, spelt by joining
    names to ``folder``; ValueError for any other."""
    if root == folder:
        return top
    if not root.startswith(folder):
        raise ValueError(f"{root} is no folder below {folder}")
    below = root[len(folder):]
    if not folder.endswith(os.sep):
        below = below[1:] if below[:1] == os.sep else ""
    if not below or not _are_names(below.split(os.sep)):
        raise ValueError(f"{root} is no folder below {folder}")
    return os.path.join(top, below)


def _write_walks(path: str, memo: dict, tool: str) -> None:
    """The walks of ``memo`` whose key names everything by text (a ``stop_at`` by its name: ``_named``), in a new
    file renamed over ``path`` (a link there is replaced, not followed)."""
    import json
    import tempfile

    walks = [[list(key[:2]) + [list(key[2])] + list(key[3:]), stamps, [list(listed) for listed in walked], stopped,
              seen[len(walked) + len(stopped):len(seen) - len(_above(key[0]))]]  # the folders it could not list
             for key, ((seen, stamps), (walked, stopped)) in memo.items()]
    try:
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path) or os.curdir, prefix=".tmp-walks-")
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:  # JSON escapes the rest
                json.dump({"format": _WALKS_FORMAT, "tool": tool, "walks": walks}, handle, separators=(",", ":"))
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except (OSError, ValueError):
        pass  # a read-only cache folder: the next run walks again


def _above(folder: str) -> list[str]:
    """The folders above ``folder`` (absolute), whose ignore files and markers a walk from it reads too."""
    out = []
    while True:
        parent = os.path.dirname(folder)
        if parent == folder:
            return out
        out.append(parent)
        folder = parent


@contextlib.contextmanager
def walks_shared() -> Iterator[None]:
    """Within this block a folder is walked once for each (exclude, stop_at): a run walks a folder given
    to find the projects below it, for the files asked for, and as its project's root. Only for a block
    in which no file is created or removed."""
    global _shared_listings
    outer = _shared_listings
    if outer is None:
        gitignore.forget()
    _shared_listings = {} if outer is None else outer
    try:
        yield
    finally:
        _shared_listings = outer


def _listing(folder: str, exclude: tuple[str, ...], stop_at: Optional[StopAt], anchor: str,
             respect_gitignore: bool) -> Listing:
    """The walk itself: top-down, folders in name order, as ``os.walk`` (whose recursion a tree 1,000
    folders deep exhausts) with a list of folders still to see; a folder that cannot be listed is left
    out, as ``os.walk`` leaves it."""
    key = (os.path.abspath(folder), folder, exclude, _named(stop_at), anchor, respect_gitignore)
    if _shared_listings is not None and key in _shared_listings:
        return _shared_listings[key]
    if _remembered is not None and key in _remembered:
        folders, listing = _remembered[key]
        if _unchanged(*folders, len(_above(key[0]))):
            if _shared_listings is not None:
                _shared_listings[key] = listing
            return listing
        del _remembered[key]
    walked: list[FolderListing] = []
    stopped: list[str] = []
    unlisted: list[str] = []  # folders that could not be listed
    top = os.path.abspath(folder)
    # a walk kept for later runs: each folder's stamps taken before it is listed and its ignore file read, so that a
    # change made meanwhile shows in them (None once one cannot be kept: too recent, a link, a link named *.py)
    above = _above(top)
    stamped: Optional[dict[str, tuple]] = {} if _remembered is not None else None
    above_stamps = _stamps(above, len(above)) if stamped is not None else None
    walked_absolute: list[str] = []  # each walked folder's absolute path
    stopped_absolute: list[str] = []
    excluded = _exclusion(exclude) if exclude else None
    bare = bare_names(exclude) if exclude else None  # a file excluded by its name alone: a set lookup
    # a folder below the anchor is counted from it as its parent's path and its name (``relative_to``, not an
    # ``abspath`` and a ``relpath`` per folder); one outside is asked of ``relative_to`` itself
    top_inside = relative_inside(folder, anchor) if excluded else None
    # (folder, its absolute path, the ignore rules of the folder holding it, its path counted from the anchor,
    # where it lies below it); next to see at the end
    pending: list[tuple[str, str, Optional[gitignore.Rules], Optional[str]]] = [(folder, top, None, top_inside)]
    while pending:
        root, absolute, outer, inside = pending.pop()
        if stamped is not None:
            taken = _stamps([absolute])
            if taken is None:
                stamped = None
            else:
                stamped[absolute] = taken
        try:
            with os.scandir(root) as scan:
                entries = list(scan)
        except OSError:
            unlisted.append(absolute)
            continue
        names = {entry.name for entry in entries}
        if stop_at is not None and root != folder and stop_at(root, names):
            stopped.append(root)
            stopped_absolute.append(absolute)
            continue
        rules = None
        if respect_gitignore:
            rules = gitignore.rules_at(top) if root == folder else gitignore.rules_entering(absolute, outer, names)
        # as globs see this folder's entries (as ``discover`` spelt them before: the walk's path, normalised)
        counted = None if excluded is None else inside if inside is not None else \
            relative_to(os.path.normpath(root) or os.curdir, anchor)
        python_files, unusual, subfolders = [], [], []
        for entry in entries:
            name = entry.name
            if _is_folder(entry):
                if excluded is not None:
                    below = _below(inside, as_glob_path(name)) if inside is not None else \
                        relative_to(os.path.join(root, name), anchor)
                    if excluded(name, below):
                        continue
                if _is_link(entry):
                    if name.endswith(".py"):  # skipped while its target is a folder: not kept
                        stamped = None
                elif not gitignore.is_ignored(rules, absolute, name, True):
                    subfolders.append(name)
            elif name.endswith(".py") and not (excluded is not None and (
                    os.path.normcase(name) in bare if bare is not None else excluded(name, _below(counted, name)))) \
                    and not gitignore.is_ignored(rules, absolute, name, False):
                (python_files if _is_plain_file(entry) else unusual).append(name)
        if unusual:  # what a link is depends on its target, which no stamp of the folder follows: not kept
            stamped = None
        walked.append(FolderListing(root, sorted(python_files), sorted(unusual)))
        walked_absolute.append(absolute)
        for name in sorted(subfolders, reverse=True):  # the first in name order is seen next
            pending.append((os.path.join(root, name), os.path.join(absolute, name), rules,
                            _below(inside, as_glob_path(name)) if inside is not None else None))
    if _shared_listings is not None:
        _shared_listings[key] = (walked, stopped)
    if stamped is not None and above_stamps is not None and len(stamped) == len(walked) + len(stopped) + len(unlisted):
        seen = walked_absolute + stopped_absolute + unlisted
        stamps = tuple(stamp for path in seen for stamp in stamped[path]) + above_stamps
        _remembered[key] = ((seen + above, stamps), (walked, stopped))
    return walked, stopped


def _is_folder(entry: os.DirEntry) -> bool:
    """A folder, or a link to one (listed as a folder and not entered, as by ``os.walk``)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_plain_file(entry: os.DirEntry) -> bool:
    """A regular file and no link: what the listing's entry type says (a link, a FIFO, a type the file system did
    not give is looked at in ``discover``)."""
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def _below(counted: str, name: str) -> str:
    """A folder's path counted from the anchor, from its parent's and its name as globs see it (``as_glob_path``: a
    backslash in a folder's name is a ``/`` there, as ``relative_to`` writes it; a file's own name is kept as it is,
    as ``discover`` always kept it)."""
    return name if counted == "." else f"{counted}/{name}"


def _is_link(entry: os.DirEntry) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return True  # as os.walk: not entered
