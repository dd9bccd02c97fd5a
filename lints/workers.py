"""Running a per-file job over many files in worker processes, largest first and in batches, with
crash isolation: a worker that dies costs only the file that killed it."""
from __future__ import annotations

import os
import queue
import signal
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional, Sequence, TypeVar

from .child_processes import die_with_parent
from .model import FileError

if TYPE_CHECKING:
    import concurrent.futures


T = TypeVar("T")
U = TypeVar("U")


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


def _pool_round(func, items, tasks: list[list[int]], workers: int, results: dict, progress,
                hand_over: Optional[HandOver] = None) -> list[list[int]]:
    """Run ``tasks`` (lists of item indices) in one pool; the tasks lost to a dead worker, in submission order."""
    import concurrent.futures  # with logging, 4 ms of a run that summarises a few files in process

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
