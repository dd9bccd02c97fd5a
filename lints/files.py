"""Finding and reading files, running a per-file job over them (serially or in processes), writing
fixed files safely, and the result cache."""
from __future__ import annotations

import concurrent.futures
import queue
import contextlib
import dataclasses
import errno
import gc
import io
import os
import re
import signal
import stat
import sys
import tempfile
import threading
import time
import tokenize
import traceback
from typing import Callable, Collection, Iterable, Iterator, NamedTuple, Optional, Sequence, TypeVar, Union

from . import gitignore
from .globs import path_match, relative_to
from .model import FileError

T = TypeVar("T")
U = TypeVar("U")

MAX_FILE_BYTES = 4 * 1024 * 1024


@dataclasses.dataclass
class SourceFile:
    path: str
    text: str
    encoding: str  # as detected: "utf-8", "utf-8-sig" (BOM), or a PEP 263 cookie
    raw: bytes


def read_source(path: str, max_bytes: int = MAX_FILE_BYTES) -> Union[SourceFile, FileError]:
    """Read and decode a Python file, or say in one line why it cannot be.

    Only regular files are read: a FIFO, socket or device named ``*.py`` would block the run
    (or never end), so it is refused before it is opened, and opened non-blocking in case it
    was swapped in between.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        return FileError(path, f"cannot read: {exc.strerror or exc}")
    if stat.S_ISDIR(st.st_mode):
        return FileError(path, "is a directory, not a Python file")
    if not stat.S_ISREG(st.st_mode):
        return FileError(path, NOT_REGULAR)
    if st.st_size > max_bytes:
        return _too_big(path, st.st_size, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        return FileError(path, f"cannot read: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return FileError(path, NOT_REGULAR)
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        return FileError(path, f"cannot read: {exc.strerror or exc}")
    finally:
        if fd >= 0:
            os.close(fd)
    if len(raw) > max_bytes:  # it grew since the stat
        return _too_big(path, len(raw), max_bytes)
    return decode_source(path, raw)


NOT_REGULAR = "not a regular file"
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _too_big(path: str, size: int, max_bytes: int) -> FileError:
    return FileError(path, f"skipped: {size} bytes is over the {max_bytes}-byte limit (--max-file-size)")


def is_regular_file(path: str) -> Optional[bool]:
    """True for a regular file (links followed), False for a FIFO, socket, device or folder, None if unknown."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return None


def source_from_text(path: str, text: str) -> SourceFile:
    """A file's text already decoded (stdin, an editor's buffer): never decoded again, since a coding
    cookie in it (``latin-1``) would then be applied to the UTF-8 it is held in."""
    return SourceFile(path, text, "utf-8", text.encode("utf-8", "surrogatepass"))


def decode_source(path: str, raw: bytes) -> Union[SourceFile, FileError]:
    if b"\x00" in raw:
        return FileError(path, "skipped: binary file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(encoding)
    except SyntaxError as exc:  # raised by detect_encoding for undecodable first lines or a bad cookie
        return FileError(path, f"cannot decode: not valid UTF-8 and no usable PEP 263 coding declaration "
                               f"({getattr(exc, 'msg', exc)})")
    except (UnicodeDecodeError, LookupError) as exc:
        where = f" at byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else ""
        return FileError(path, f"cannot decode as {encoding}{where}: not valid UTF-8 and no usable PEP 263 "
                               f"coding declaration")
    return SourceFile(path, text, encoding, raw)


def within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (both absolute and normalised)."""
    return path == folder or path.startswith(os.path.join(folder, ""))


def _excluded(name: str, full: str, exclude: tuple[str, ...], anchor: str) -> bool:
    return path_match(relative_to(full, anchor), exclude) is not None or path_match(
        name, tuple(p for p in exclude if "/" not in p)) is not None  # `./build` is no name: the top one only


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

    for given in paths:
        if os.path.isdir(given):
            for root, names in _walk(given, exclude, stop_at, anchor, respect_gitignore):
                root = os.path.normpath(root)
                root = "" if root == os.curdir else root  # `a.py`, not `./a.py`
                for name in names:
                    full = os.path.join(root, name)
                    if not _excluded(name, full, exclude, anchor):
                        if is_regular_file(full) is False:  # a FIFO would block the run; a broken link
                            errors.append(FileError(full, NOT_REGULAR))  # reports its own error later
                        else:
                            files.append(full)
        elif os.path.lexists(given):
            files.append(given)  # a broken link or unreadable file reports its own error
        else:
            errors.append(FileError(os.path.normpath(given), "no such file or directory"))
    return sorted(dict.fromkeys(files)), errors


# (folder, the names of its entries) -> whether a walk leaves that folder out
StopAt = Callable[[str, Collection[str]], bool]


def stopping_points(folder: str, exclude: Iterable[str], stop_at: StopAt, anchor: str = "",
                    respect_gitignore: bool = True) -> list[str]:
    """The folders below ``folder`` that ``discover``'s walk from it leaves out (``stop_at``)."""
    return _listing(folder, tuple(exclude), stop_at, anchor, respect_gitignore)[1]


def _walk(folder: str, exclude: tuple[str, ...], stop_at: Optional[StopAt] = None, anchor: str = "",
          respect_gitignore: bool = True) -> Iterator[tuple[str, list[str]]]:
    """(folder, sorted names of its Python files) under ``folder``, not into symlinked, excluded or
    ignored folders (a walk never enters a link, so ``stop_at`` is asked only of real folders, once each)."""
    return iter(_listing(folder, exclude, stop_at, anchor, respect_gitignore)[0])


Listing = tuple[list[tuple[str, list[str]]], list[str]]  # (folder, its .py names) walked; the folders left out
_shared_listings: Optional[dict[tuple, Listing]] = None


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
    key = (os.path.abspath(folder), folder, exclude, stop_at, anchor, respect_gitignore)
    if _shared_listings is not None and key in _shared_listings:
        return _shared_listings[key]
    walked: list[tuple[str, list[str]]] = []
    stopped: list[str] = []
    top = os.path.abspath(folder)
    # (folder, its absolute path, the ignore rules of the folder holding it); next to see at the end
    pending: list[tuple[str, str, Optional[gitignore.Rules]]] = [(folder, top, None)]
    while pending:
        root, absolute, outer = pending.pop()
        try:
            with os.scandir(root) as scan:
                entries = list(scan)
        except OSError:
            continue
        names = {entry.name for entry in entries}
        if stop_at is not None and root != folder and stop_at(root, names):
            stopped.append(root)
            continue
        rules = None
        if respect_gitignore:
            rules = gitignore.rules_at(top) if root == folder else gitignore.rules_entering(absolute, outer, names)
        python_files, subfolders = [], []
        for entry in entries:
            if _is_folder(entry):
                if not _is_link(entry) and not _excluded(entry.name, os.path.join(root, entry.name), exclude, anchor) \
                        and not gitignore.is_ignored(rules, absolute, entry.name, True):
                    subfolders.append(entry.name)
            elif entry.name.endswith(".py") and not gitignore.is_ignored(rules, absolute, entry.name, False):
                python_files.append(entry.name)
        walked.append((root, sorted(python_files)))
        for name in sorted(subfolders, reverse=True):  # the first in name order is seen next
            pending.append((os.path.join(root, name), os.path.join(absolute, name), rules))
    if _shared_listings is not None:
        _shared_listings[key] = (walked, stopped)
    return walked, stopped


def _is_folder(entry: os.DirEntry) -> bool:
    """A folder, or a link to one (listed as a folder and not entered, as by ``os.walk``)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_link(entry: os.DirEntry) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return True  # as os.walk: not entered


_pauses = 0  # collector_paused blocks running now, in any thread
_pauses_lock = threading.Lock()
_collector_was_enabled = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """CPython's cyclic collector off for a block that builds many long-lived objects.

    Summaries are acyclic lists and dicts, so there is nothing for it to free, yet each of its full
    passes walks every object alive: with it on, summarising and loading a large tree takes two to
    six times as long (measured on sglang 0.5.15 in one process: summarising 14.3 s against 6.0 s;
    loading 55 MB of summaries as JSON 6.0 s against 1.0 s). Cyclic garbage made inside is freed by
    a later full collection. Blocks may nest or overlap in threads: the last one out restores.
    """
    global _pauses, _collector_was_enabled
    with _pauses_lock:
        if _pauses == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pauses_lock:
            _pauses -= 1
            if _pauses == 0 and _collector_was_enabled:
                if gc.get_freeze_count() == 0:  # never thaw what the host process froze on purpose
                    # Everything made inside would be the youngest generation, and the first
                    # collection would walk all of it (0.7 s on sglang 0.5.15): file it with the oldest.
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


def in_forked_child(work: Callable[[], None]) -> Optional[Callable[[], None]]:
    """Run ``work`` in a forked child while this process goes on (Redis's BGSAVE: a forked copy of
    memory writes a snapshot); returns the wait for it, or None where this cannot fork safely (no
    ``fork``, other Python threads that may hold locks the child would need, or fork fails).

    In the child, SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt (so ``work`` cleans up after
    itself) unless the parent ignores them; the wait warns when the child did not end well.
    """
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return None
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:  # None where the descriptor is closed
            try:
                stream.flush()  # else the child's exit could write the parent's pending output twice
            except (OSError, ValueError):
                pass
    parent_pid = os.getpid()
    try:
        pid = os.fork()
    except OSError:  # EAGAIN (process limits), ENOMEM: do the work in this process instead
        return None
    if pid == 0:
        code = 1
        try:
            for number in _DEFERRED_SIGNALS:
                if signal.getsignal(number) is not signal.SIG_IGN:
                    signal.signal(number, _interrupt)
            die_with_parent(parent_pid)  # SIGTERM: `work` removes its temp file
            work()
            code = 0
        except KeyboardInterrupt:
            code = _INTERRUPTED
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)  # no atexit handlers or buffers of the parent's
    return lambda: _reap(pid)


_INTERRUPTED = 130  # the child was stopped by a signal the user sent: nothing to warn about


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


_warnings_quiet = False


def quiet_warnings(quiet: bool) -> None:
    """``-q``: warnings are left out too, as in ruff (a run's findings and errors are not)."""
    global _warnings_quiet
    _warnings_quiet = quiet


def warn(message: str) -> None:
    """``gradmode-lint: warning: MESSAGE`` on stderr, unless the run is quiet."""
    if not _warnings_quiet:
        print(f"gradmode-lint: warning: {message}", file=sys.stderr)


def _reap(pid: int) -> None:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, _INTERRUPTED):
        why = f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() \
            else f"exit status {code}"
        warn(f"the background cache writer failed ({why})")


def run_jobs(func: Callable[[U], T], items: Sequence[U], jobs: int,
             progress: Optional[Callable[[int], None]] = None,
             on_crash: Optional[Callable[[U, str], T]] = None,
             weight: Optional[Callable[[U], int]] = None, batch_weight: int = 0, min_weight: int = 0,
             hand_over: Optional["HandOver"] = None) -> list[T]:
    """``[func(i) for i in items]``, in ``jobs`` processes when that pays; results in input order.

    The largest items first (by file size, or ``weight``), so that one worker does not end up with
    all the big files. With ``batch_weight``, items lighter than that travel together in tasks of
    about that weight (a task per small file costs the main process more than summarising it), with
    at least 8 tasks per worker. A worker that dies (a crash in native code, the OOM killer) does
    not stop the run: the items it may have held are rerun one per process, and the one that kills
    its process again gets ``on_crash(item, why)`` (default: a ``FileError``) as its result.
    In-process (``jobs <= 1``, or items weighing less than ``min_weight`` in all: starting workers
    would cost more) nothing guards against such a crash. ``hand_over`` is how a pool worker's
    results travel back (``HandOver``); in process, and for items rerun one per process after a
    crash, results are used as they are: the caller takes both what ``func`` returns and what
    ``unpack`` gives.
    """
    sizes = [(weight or _weight)(item) for item in items] if jobs > 1 and len(items) > 1 else []
    if jobs <= 1 or len(items) < 2 or sum(sizes) < min_weight:
        out = []
        for item in items:
            out.append(func(item))
            if progress:
                progress(1)
        return out
    on_crash = on_crash or _crash_error
    remaining = sorted(range(len(items)), key=lambda i: -sizes[i])  # stable: ties keep input order
    workers = min(jobs, len(items))
    batch_weight = min(batch_weight, sum(sizes) // (8 * workers))
    results: dict[int, T] = {}
    while remaining:
        lost = _pool_round(func, items, _batches(remaining, sizes, batch_weight), workers, results, progress,
                           hand_over)
        # The items a dead worker may have held are those of the first tasks not done: the pool
        # hands out tasks in submission order and queues at most one beyond its workers.
        suspects = [i for task in lost[:workers + 1] for i in task]
        remaining = [i for task in lost[workers + 1:] for i in task]
        if len(suspects) > workers + 1:  # batches died: their items go again one task each first,
            remaining, batch_weight = suspects + remaining, 0  # so few of them need a process alone
            continue
        _isolated_round(func, items, suspects, workers, results, progress, on_crash)
    return [results[i] for i in range(len(items))]


def _batches(order: list[int], sizes: list[int], batch_weight: int) -> list[list[int]]:
    """``order`` cut into consecutive tasks of about ``batch_weight`` (an item at least that heavy alone)."""
    tasks: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i in order:
        current.append(i)
        total += sizes[i]
        if total >= batch_weight:
            tasks.append(current)
            current, total = [], 0
    if current:
        tasks.append(current)
    return tasks


class HandOver(NamedTuple):
    """How a pool worker's results travel back: ``pack`` runs in the worker on each result, ``unpack``
    in the main process on what arrives, as it arrives (while the workers go on)."""

    pack: Callable
    unpack: Callable


def _apply_each(func: Callable[[U], T], items: list[U], pack: Optional[Callable] = None) -> list:
    if pack is None:
        return [func(item) for item in items]
    return [pack(func(item)) for item in items]


def _weight(item: object) -> int:
    raw = getattr(item, "raw", None)
    if isinstance(raw, (bytes, str)):
        return len(raw)
    try:
        return os.stat(item).st_size if isinstance(item, (str, os.PathLike)) else 0
    except OSError:
        return 0


def _item_path(item: object) -> str:
    return str(getattr(item, "path", item))


def _crash_error(item: object, why: str) -> FileError:
    return FileError(_item_path(item), f"internal error: {why}")


_POLL_SECONDS = 0.2


def _worker_init(parent_pid: int) -> None:
    """Workers leave Ctrl-C and SIGTERM to the main process, which stops them (see ``_stop``), and end
    with it (``die_with_parent``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent_pid)


_parent_pid: Optional[int] = None  # in a worker: the process it was started by; None elsewhere
_PARENT_GONE = 70  # a worker's exit status when it ends because the run that started it is gone
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int, on_death: int = signal.SIGTERM) -> None:
    """In a process that the run ``parent_pid`` started (a worker, a cache writer): end when that run
    ends, even by SIGKILL, which no handler of its sees. Left running, a worker goes on summarising or
    writing fixed files for a run that is gone, then waits forever for work, holding the run's stdout
    and stderr pipes (``gradmode-fix . | tee log`` never ends). On Linux the kernel sends ``on_death``
    when the parent dies (``PR_SET_PDEATHSIG``); SIGTERM, so that a write under way finishes whole
    (``deferred_signals``). Everywhere, ``write_file`` first checks that the parent is still there."""
    global _parent_pid
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(on_death), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # no prctl: the check before each write still holds
    _parent_pid = os.getppid()  # a fork server's child has that server as its parent, not the run
    if _parent_pid != parent_pid and not _pid_alive(parent_pid):
        os._exit(_PARENT_GONE)  # the run died before the signal was asked for: nothing will send it


def parent_gone() -> bool:
    """In a worker: whether the run that started it is gone (then it was re-parented)."""
    return _parent_pid is not None and os.getppid() != _parent_pid


def _end_if_orphaned() -> None:
    """Nothing is written for a run that is gone: the worker ends, its temp files removed."""
    if parent_gone():
        remove_in_flight_temps()
        os._exit(_PARENT_GONE)


def _pool_round(func, items, tasks: list[list[int]], workers: int, results: dict, progress,
                hand_over: Optional[HandOver] = None) -> list[list[int]]:
    """Run ``tasks`` (lists of item indices) in one pool; the tasks lost to a dead worker, in submission order."""
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=min(workers, len(tasks)), initializer=_worker_init,
                                                  initargs=(os.getpid(),))
    lost: list[int] = []  # task numbers
    try:
        futures: dict[concurrent.futures.Future, int] = {}
        for n, task in enumerate(tasks):
            try:
                futures[pool.submit(_apply_each, func, [items[i] for i in task],
                                    hand_over.pack if hand_over else None)] = n
            except concurrent.futures.process.BrokenProcessPool:
                lost.extend(range(n, len(tasks)))
                break
        # Each future reports itself on one queue when done: waiting costs O(1) per result (a
        # `concurrent.futures.wait` over all pending futures costs O(pending) each time: quadratic).
        finished: "queue.SimpleQueue[concurrent.futures.Future]" = queue.SimpleQueue()
        for future in futures:
            future.add_done_callback(finished.put)
        remaining = len(futures)
        while remaining:
            # A timed wait: a signal that the kernel hands to one of the pool's threads only runs its
            # Python handler once the main thread runs again, which an untimed wait would not let it.
            try:
                future = finished.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                continue
            remaining -= 1
            n = futures[future]
            try:
                values = future.result()
            except concurrent.futures.process.BrokenProcessPool:
                lost.append(n)
                continue
            for i, value in zip(tasks[n], values):
                results[i] = hand_over.unpack(value) if hand_over else value
            if progress:
                progress(len(values))
    except BaseException:  # Ctrl-C, SIGTERM (as SystemExit), or func's own exception
        _stop(pool)
        raise
    pool.shutdown(wait=True)
    return [tasks[n] for n in sorted(lost)]


def _stop(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Cancel what has not started and stop the workers. A worker is never stopped halfway through
    a write: ``write_file`` defers SIGTERM and SIGINT until the file is whole."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # shutdown() forgets them
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        try:
            proc.terminate()
        except (OSError, AttributeError, ValueError):
            pass
    for proc in processes:
        try:
            proc.join(5)
        except (OSError, AttributeError, ValueError, AssertionError):
            pass


def _isolated_child(func, item, conn, parent_pid: int) -> None:
    _worker_init(parent_pid)
    try:
        message = (True, func(item))
    except BaseException as exc:  # handed to the parent, which raises it as the pool would
        message = (False, exc)
    try:
        conn.send(message)
    except Exception as exc:  # an unpicklable result or exception
        conn.send((False, RuntimeError(f"cannot send the result back: {type(exc).__name__}: {exc}")))
    conn.close()


def _isolated_round(func, items, order: list[int], workers: int, results: dict, progress, on_crash) -> None:
    """Each of ``order`` in a process of its own, ``workers`` at a time."""
    import multiprocessing
    import multiprocessing.connection

    ctx = multiprocessing.get_context()
    pending = list(order)
    running: dict = {}  # receiving end -> (index, process)
    try:
        while pending or running:
            while pending and len(running) < workers:
                i = pending.pop(0)
                receive, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_isolated_child, args=(func, items[i], send, os.getpid()), daemon=True)
                proc.start()
                send.close()
                running[receive] = (i, proc)
            for receive in multiprocessing.connection.wait(list(running), timeout=_POLL_SECONDS):
                i, proc = running.pop(receive)
                try:
                    ok, value = receive.recv()
                except (EOFError, OSError):
                    ok, value = None, None
                receive.close()
                proc.join()
                if ok is None:
                    results[i] = on_crash(items[i], f"the worker process died on this file ({_death(proc.exitcode)})")
                elif ok:
                    results[i] = value
                else:
                    raise value
                if progress:
                    progress(1)
    finally:
        for receive, (i, proc) in running.items():
            proc.terminate()
            proc.join()
            receive.close()


def _death(exitcode: Optional[int]) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"killed by {name}"
    return f"exit status {exitcode}"


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def is_read_only(path: str) -> bool:
    """No write bit at all (root could still write it, but the owner asked us not to)."""
    try:
        return (os.stat(path).st_mode & 0o222) == 0 or not os.access(path, os.W_OK)
    except OSError:
        return True


class FileChangedError(OSError):
    """The file on disk is no longer the content the fix was computed from."""


# Temp files are named ``.gradmode-PID-RANDOM.tmp`` (older versions: ``.gradmode-RANDOM.tmp``).
_TEMP_PREFIX = ".gradmode-"
_TEMP_SUFFIX = ".tmp"
_TEMP_NAME = re.compile(r"\.gradmode-(?:(?P<pid>\d+)-)?[A-Za-z0-9_]+\.tmp\Z")
STALE_TEMP_SECONDS = 600  # a write takes milliseconds: a temp file this old is abandoned, whoever made it
_DEFERRED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
_in_flight: set[str] = set()  # temp files this process is writing now
_swept: set[str] = set()  # folders already cleaned of stale temp files by this process


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block is done (they are delivered right after it).

    A write is therefore never interrupted by them halfway; only SIGKILL (or a power cut) can.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def remove_in_flight_temps() -> None:
    """Remove the temp files this process is writing (for a signal handler that is about to exit)."""
    for tmp in list(_in_flight):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        _in_flight.discard(tmp)


def sweep_stale_temps(folder: str) -> list[str]:
    """Remove our own abandoned temp files (a run killed by SIGKILL) from ``folder``; the removed paths.

    A temp file is abandoned when the process named in it is gone, or when it is older than
    ``STALE_TEMP_SECONDS``; one that another live run is writing now is left alone.
    """
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        match = _TEMP_NAME.match(entry.name)
        if match is None or entry.path in _in_flight:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        pid = match.group("pid")
        if now - st.st_mtime > STALE_TEMP_SECONDS or (pid is not None and not _pid_alive(int(pid))):
            try:
                os.unlink(entry.path)
                removed.append(entry.path)
            except OSError:
                pass
    return removed


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():  # ours, and not in flight: left by a killed process whose pid we now have
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists (another user's), or cannot tell
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A process killed but not yet reaped (its parent died too: init reaps it later) still answers
    ``kill(pid, 0)``; it writes nothing more. Linux only; elsewhere: not known to be one."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat_line = handle.read()
    except OSError:
        return False
    return stat_line[stat_line.rfind(b")") + 2:][:1] == b"Z"


def write_file(path: str, data: bytes, expected: Optional[bytes] = None) -> str:
    """Replace the content of ``path`` with ``data``, keeping what makes the file itself; the method used.

    The file is written whole or not at all: ``data`` goes to a temp file in the same folder
    (fsynced, given the file's mode, owner and group) that is renamed over it ("replace"), so a kill
    at any moment leaves either the old or the new content, never half of it. A rename gives the
    file a new inode, so where it would lose something the file is instead rewritten in place
    ("in-place": open, write, truncate, fsync; the same inode) - when the file has other hard links,
    when its owner or group cannot be given to the temp file, or when the temp file cannot be
    created or renamed (a folder we may not write to, a bind-mounted file). This is vim's
    ``backupcopy=auto``. Both defer SIGINT/SIGTERM/SIGHUP until the write is done.

    With ``expected``, the file must still hold exactly those bytes (the content the fix was
    computed from), else ``FileChangedError`` is raised and nothing is written.
    Symlinks are written through, not replaced.
    """
    _end_if_orphaned()
    real = os.path.realpath(path)
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, NOT_REGULAR)
    folder = os.path.dirname(real) or "."
    if folder not in _swept:
        _swept.add(folder)
        sweep_stale_temps(folder)
    if st.st_nlink <= 1:
        try:
            if _write_by_rename(real, data, st, folder, expected):
                return "replace"
        except FileChangedError:
            raise
        except OSError:
            pass  # could not create, fill or rename the temp file: write in place instead
    _write_in_place(real, data, expected)
    return "in-place"


_LINE = re.compile(r"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+\Z")


def source_lines(text: str) -> list[str]:
    """Lines as Python sees them, with their ends: ended by LF, CRLF or CR only (``str.splitlines``
    also splits at form feeds and other characters, which are not line ends in source code)."""
    return _LINE.findall(text)


def text_reader(overrides: dict[str, str]) -> Callable[[str], str]:
    """``text_of(path)``: the text given for ``path`` (an editor's unsaved buffer), else the file's
    ("" when it cannot be read: the caller has reported that already)."""
    def text_of(path: str) -> str:
        if path in overrides:
            return overrides[path]
        source = read_source(path)
        return source.text if isinstance(source, SourceFile) else ""
    return text_of


def read_regular_bytes(path, max_bytes: Optional[int] = None, follow_links: bool = True) -> bytes:
    """The bytes of a regular file (a cache file, a baseline); raises OSError for anything else: a
    FIFO or device is refused before it is read (it would block or never end), as is a file over
    ``max_bytes`` and, without ``follow_links``, a symbolic link."""
    fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
                 | (0 if follow_links else getattr(os, "O_NOFOLLOW", 0)))
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(st.st_mode):
            raise OSError("not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise OSError(f"over {max_bytes} bytes")
        return handle.read() if max_bytes is None else handle.read(max_bytes + 1)


def write_new_file(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` (a report, a baseline) as a shell's ``>`` would, but whole or not at
    all where that changes nothing else: a new file, or a regular file of ours that we may write in a
    folder we may write, is replaced through a temp file renamed over it, keeping its mode; through a
    symbolic link, the file it points to is (the link stays). Anything else is written in place, as
    ``>`` does: ``/dev/stdout``, a FIFO or a terminal (a regular file renamed over it would replace
    it), a file with other hard links (they keep seeing it), someone else's file (it stays theirs), a
    file in a folder we may not write; and a read-only file is refused, as ``>`` refuses it."""
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    folder = os.path.dirname(os.path.abspath(target))
    if st is not None and (not stat.S_ISREG(st.st_mode) or st.st_nlink > 1 or st.st_uid != os.geteuid()
                           or not os.access(target, os.W_OK) or not os.access(folder, os.W_OK)):
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        with open(target, "wb") as handle:  # a FIFO blocks until read, as with `> fifo`
            handle.write(data)
        return
    fd, temp = tempfile.mkstemp(prefix=".gradmode-", suffix=".tmp", dir=folder)
    try:
        # mkstemp's 0600: the file gets the mode it had, or a new file's (0666 less the umask)
        os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it
    os.umask(mask)
    return mask


def _same_content(fd: int, expected: bytes) -> bool:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    size = 0
    while size <= len(expected):
        chunk = os.read(fd, max(65536, len(expected) + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks) == expected


def _check_unchanged(real: str, expected: Optional[bytes]) -> None:
    if expected is None:
        return
    fd = os.open(real, os.O_RDONLY | _O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        same = _same_content(fd, expected)
    finally:
        os.close(fd)
    if not same:
        raise FileChangedError(errno.EAGAIN, "the file changed on disk while it was being fixed")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _write_by_rename(real: str, data: bytes, st: os.stat_result, folder: str, expected: Optional[bytes]) -> bool:
    """False when the temp file cannot get the file's owner and group (then write in place)."""
    with deferred_signals():
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f"{_TEMP_PREFIX}{os.getpid()}-", suffix=_TEMP_SUFFIX)
        _in_flight.add(tmp)
        try:
            try:
                mine = os.fstat(fd)
                if (mine.st_uid, mine.st_gid) != (st.st_uid, st.st_gid) and hasattr(os, "fchown"):
                    try:
                        os.fchown(fd, st.st_uid if mine.st_uid != st.st_uid else -1,
                                  st.st_gid if mine.st_gid != st.st_gid else -1)
                    except PermissionError:
                        return False
                os.fchmod(fd, stat.S_IMODE(st.st_mode))  # after chown, which clears set-id bits
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            _check_unchanged(real, expected)
            _end_if_orphaned()  # the run may have died while the temp file was written
            os.replace(tmp, real)
            _in_flight.discard(tmp)
        finally:
            if tmp in _in_flight:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                _in_flight.discard(tmp)
    _fsync_folder(folder)
    return True


def _write_in_place(real: str, data: bytes, expected: Optional[bytes]) -> None:
    with deferred_signals():
        fd = os.open(real, os.O_RDWR | _O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, NOT_REGULAR)
            if expected is not None and not _same_content(fd, expected):
                raise FileChangedError(errno.EAGAIN, "the file changed on disk while it was being fixed")
            _end_if_orphaned()
            os.lseek(fd, 0, os.SEEK_SET)
            _write_all(fd, data)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (best effort; not possible everywhere)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
