"""Summarising the project's files: each file with its module name and content key
(``ProjectFile``), the cached summaries reused, the rest summarised in process or in workers, whose
summaries travel back as the JSON text the cache keeps (``SUMMARY_HAND_OVER``)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Optional, Union

from .gc_pause import collector_paused
from .model import FileError
from .sources import MAX_FILE_BYTES, SourceFile, read_source, source_from_text
from .summary import summarize
from .summary_cache import SummaryCache, encode_json, row_words
from .summary_records import with_records
from .walk import settled
from .workers import HandOver, run_jobs


@dataclasses.dataclass
class ProjectFile:
    """A file of the project to summarise, with its module name and content key."""

    path: str
    module: str
    is_package: bool
    # content hash; "" when unreadable (summarising reports why); None when not read yet: with no
    # cached summaries to compare, the worker that summarises a file hashes it (read once, not twice)
    key: Optional[str]
    # the file's stamp (``file_stamp``) that ``key`` stands for, where one was taken and settled
    stamp: Optional[str] = None


def file_key(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def text_key(path: str, text: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The key of ``text`` given in place of the file at ``path`` (an editor's buffer): the file's own
    key when the file holds that very text, so that a buffer as saved reuses the run's result; else a
    key no file's bytes can have (a buffer's UTF-8 may be a file's bytes under another coding cookie)."""
    on_disk = read_source(path, max_bytes)
    if not isinstance(on_disk, FileError) and on_disk.text == text:
        return file_key(on_disk.raw)
    return "text-" + file_key(text.encode("utf-8", "surrogatepass"))


def content_key(path: str, max_bytes: int = MAX_FILE_BYTES, known: Optional[dict] = None,
                stamp: Optional[str] = None) -> str:
    """The hash the caches compare a file by; "" when it cannot be read (or is no regular file, or is
    over ``max_bytes``: its cached summary must not stand in for the error summarising it gives).
    ``known``: path -> (stamp, key) from earlier calls of a long-lived process (the language server),
    where a file whose size, times and inode are as they were is not read again; ``stamp``: the file's
    ``file_stamp``, where the caller took it already (one stat per file and run)."""
    if known is not None:
        if stamp is None:
            try:
                stamp = file_stamp(os.stat(path), max_bytes)
            except (OSError, ValueError):
                return ""
        remembered = known.get(path)
        if remembered is not None and remembered[0] == stamp:
            return remembered[1]
    try:
        with open(path, "rb", opener=_nonblocking) as handle:
            raw = handle.read(max_bytes + 1)
            key = file_key(raw) if os.path.isfile(path) and len(raw) <= max_bytes else ""
    except OSError:
        return ""
    if known is not None and key and _settled_stamp(stamp):
        known[path] = (stamp, key)
    return key


def _settled_stamp(stamp: str) -> bool:
    """``settled`` of the times a ``file_stamp`` holds."""
    _, mtime_ns, ctime_ns, *_ = stamp[1:-1].split(",")
    return settled(int(mtime_ns), int(ctime_ns))


def file_stamp(status: os.stat_result, max_bytes: int) -> str:
    """What a file's key is remembered by (``content_key``'s ``known``): its size, times, inode and device, and
    the size limit it was read under, as the cache keeps it (``[size,mtime,ctime,inode,device,max_bytes]``: compared
    as text, no row's stamp is parsed)."""
    return (f"[{status.st_size},{status.st_mtime_ns},{status.st_ctime_ns},{status.st_ino},{status.st_dev},"
            f"{max_bytes}]")


def _stamp_before_reading(path: str, max_bytes: int) -> Optional[str]:
    """The file's stamp, taken before it is read: an edit after it moves the times, so the key read later is never
    remembered by the times of older content. None where it cannot be taken or is too recent to stand for the file."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return file_stamp(status, max_bytes) if settled(status.st_mtime_ns, status.st_ctime_ns) else None


def _nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def collect_summaries(entries: list[ProjectFile], jobs: int, cache: Optional[SummaryCache],
                      max_bytes: int = MAX_FILE_BYTES, overrides: Optional[dict[str, str]] = None,
                      progress=None, prune: bool = True) -> tuple[dict[str, dict], dict[str, FileError]]:
    """path -> summary for every file (``overrides``: path -> text to use instead of the file's; ``prune``:
    the cache keeps only these files)."""
    summaries: dict[str, dict] = {}
    errors: dict[str, FileError] = {}
    todo: list[_Job] = []
    todo_entries: list[ProjectFile] = []
    overrides = overrides or {}
    if cache is not None:
        cache.reused = 0  # this collection's: a language server's cache lives through many runs
    for entry in entries:
        if entry.path in overrides:
            result = summarize_source(source_from_text(entry.path, overrides[entry.path]), entry.module,
                                      entry.is_package)
            (errors if isinstance(result, FileError) else summaries)[entry.path] = result
            if cache is not None and cache.keeps_buffers and entry.key and not isinstance(result, FileError):
                cache.put(entry.path, entry.key, result)
            continue
        cached = cache.get(entry.path, entry.key) if cache is not None and entry.key else None
        if cached is not None and cached.get("module") == entry.module:
            summaries[entry.path] = cached
            cache.reused += 1
            continue
        todo.append(_Job(entry.path, entry.module, entry.is_package, max_bytes))
        todo_entries.append(entry)
    if progress is not None:
        progress.start(len(todo))
    try:
        with collector_paused():  # the summaries the workers hand back are millions of objects
            results = run_jobs(_summarize_job, todo, jobs, progress.advance if progress is not None else None,
                               on_crash=lambda j, why: ("", None, FileError(j.path, why)), weight=_job_weight,
                               batch_weight=SUMMARY_BATCH_BYTES, min_weight=PARALLEL_MIN_BYTES,
                               hand_over=SUMMARY_HAND_OVER)
    finally:
        if progress is not None:
            progress.close()
    # the stamps the workers took: the next run need not read these files again to hash them
    learnt = {}
    for job, entry, (key, stamp, result, *text) in zip(todo, todo_entries, results):
        entry.key, entry.stamp = key, stamp if key else None
        if isinstance(result, FileError):
            errors[job.path] = result
        else:
            summaries[job.path] = result
            if cache is not None and key:
                cache.put(job.path, key, result, *text)
                if stamp is not None:
                    learnt[job.path] = (stamp, key)
    if cache is not None and learnt:
        cache.remember_keys(learnt)
    if cache is not None and prune:
        cache.prune(summaries)
    return summaries, errors


# Small files are summarised in tasks of about this much source: one task per file cost the main
# process twice the CPU time (sglang 0.5.15, -j 2: 0.95 s against 0.46 s; wall 3.5 s against 3.0 s).
SUMMARY_BATCH_BYTES = 1 << 18
# Less source than this is summarised in process whatever --jobs says: starting the workers took
# longer (400 projects of 6 files each, as separate projects: 8.4 s with workers, 2.0 s without).
PARALLEL_MIN_BYTES = 1 << 20


def _job_weight(job: _Job) -> int:
    try:
        return os.stat(job.path).st_size
    except OSError:
        return 0


def summarize_source(source: SourceFile, module: str, is_package: bool) -> Union[dict, FileError]:
    """The summary of one decoded file, or the one-line reason it has none."""
    try:
        return summarize(source.text, source.path, module, is_package)
    except SyntaxError as exc:
        # syntax newer than this interpreter's (PEP 695, PEP 701): summarised from libcst's reading
        from .newer_syntax import downlevel  # libcst is slow to import: only for such files

        newer = downlevel(source.text)
        if newer is not None:
            try:
                return summarize(newer, source.path, module, is_package)
            except SyntaxError:
                pass
        return FileError(source.path, f"syntax error at line {exc.lineno}, column {exc.offset}: {exc.msg}")
    except (RecursionError, MemoryError):
        return FileError(source.path, "cannot analyze: expressions nested too deeply")
    except ValueError as exc:
        return FileError(source.path, f"cannot parse: {exc}")


@dataclasses.dataclass
class _Job:
    """One file to summarise in a worker process."""

    path: str
    module: str
    is_package: bool
    max_bytes: int


def _summarize_job(job: _Job) -> tuple[str, Optional[tuple], Union[dict, FileError]]:
    with collector_paused():
        return _summarize_file(job)


def _summarize_file(job: _Job) -> tuple[str, Optional[tuple], Union[dict, FileError]]:
    """(key, stamp taken before reading (``_stamp_before_reading``), summary or error)."""
    stamp = _stamp_before_reading(job.path, job.max_bytes)
    source = read_source(job.path, job.max_bytes)
    if isinstance(source, FileError):  # the key a rerun compares, also for a file it cannot use
        return content_key(job.path, job.max_bytes), None, source
    try:
        return file_key(source.raw), stamp, summarize_source(source, job.module, job.is_package)
    except Exception as exc:  # one bad file must not stop the run
        return file_key(source.raw), stamp, FileError(job.path, f"internal error while summarising: "
                                                                f"{type(exc).__name__}: {exc}")


def _pack_summary(result: tuple[str, Optional[tuple], Union[dict, FileError]]) -> tuple:
    """In a worker: a summary travels back as the JSON text the summaries cache holds, with that text's words
    (``summary_cache.row_words``). Encoding it once serves the cache too, and decoding JSON costs the main
    process less than unpickling."""
    key, stamp, summary = result
    if isinstance(summary, dict):
        try:
            text = encode_json(summary)
        except (ValueError, RecursionError):  # not JSON (nested too deep): pickled, as in process; not cached
            return result
        return key, stamp, text, row_words(text)
    return result


def _unpack_summary(packed: tuple) -> tuple:
    """In the main process: ``(key, stamp, summary, text, words)`` for a summary that came as text, else as it
    came."""
    if len(packed) == 4 and isinstance(packed[2], str):
        key, stamp, text, words = packed
        return key, stamp, with_records(json.loads(text)), text, words
    return packed


SUMMARY_HAND_OVER = HandOver(_pack_summary, _unpack_summary)
