"""How to store a project's summaries: one JSON file, one SQLite file (a row per module), or a JSON file per
module. Times writing and reading them all, and reading and writing one, on a real tree's summaries.

    python bench/cache_storage.py                 # sglang-0.5.23 (fetched as bench/corpus.py does)
    python bench/cache_storage.py --tree vllm-0.11.0

Summarises the tree with this checkout (no cache), encodes each summary as the cache does, then times each
layout in a temporary folder (best of 3, the cyclic collector paused as the cache pauses it).
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import corpus  # noqa: E402


def best(work, rounds: int = 3) -> float:
    times = []
    for _ in range(rounds):
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
        gc.enable()
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default="sglang-0.5.23", choices=sorted(corpus.CORPORA))
    args = parser.parse_args(argv)
    corpus.ensure(args.tree)
    from lints.engine import project_files
    from lints.options import Config
    from lints.summary_cache import encode_json
    from lints.summary_jobs import collect_summaries

    root = corpus.project_dir(args.tree)
    os.chdir(root)
    summaries, _ = collect_summaries(project_files(".", Config(), read_keys=False), 2, None)
    texts = {path: encode_json(summary) for path, summary in summaries.items()}
    one = sorted(texts)[len(texts) // 2]
    print(f"{args.tree}: {len(texts)} summaries, {sum(map(len, texts.values())) / 1e6:.1f} MB of JSON")
    with tempfile.TemporaryDirectory(prefix="cache-storage-") as scratch:
        folder = Path(scratch)
        whole = folder / "summaries.json"
        database = folder / "cache.sqlite3"
        per_file = folder / "files"
        per_file.mkdir()

        def file_of(path: str) -> Path:
            return per_file / (hashlib.sha256(path.encode()).hexdigest()[:16] + ".json")

        def write_whole() -> None:
            whole.write_text("{" + ",".join(f"{json.dumps(p)}:[\"k\",{t}]" for p, t in texts.items()) + "}")

        def write_database() -> None:
            database.unlink(missing_ok=True)
            with sqlite3.connect(database) as db:
                db.execute("CREATE TABLE summaries (path TEXT PRIMARY KEY, key TEXT NOT NULL, summary TEXT NOT NULL)")
                db.executemany("INSERT INTO summaries VALUES (?, 'k', ?)", texts.items())
            db.close()

        def read_database(query: str, args: tuple = (), decode: bool = True) -> None:
            with sqlite3.connect(database) as db:
                for row in db.execute(query, args):
                    if decode:
                        json.loads(row[1])
            db.close()

        def write_one_row() -> None:
            with sqlite3.connect(database) as db:
                db.execute("INSERT OR REPLACE INTO summaries VALUES (?, 'k2', ?)", (one, texts[one]))
            db.close()

        def write_files() -> None:
            for path, text in texts.items():
                file_of(path).write_text(text)

        rows = [
            ("one JSON file", best(write_whole), best(lambda: json.loads(whole.read_bytes())), "-", "-"),
            ("SQLite, a row per module", best(write_database),
             best(lambda: read_database("SELECT path, summary FROM summaries")),
             best(lambda: read_database("SELECT key, summary FROM summaries WHERE path = ?", (one,))),
             best(write_one_row)),
            ("a JSON file per module", best(write_files),
             best(lambda: [json.loads(file_of(p).read_bytes()) for p in texts]),
             best(lambda: json.loads(file_of(one).read_bytes())), best(lambda: file_of(one).write_text(texts[one]))),
        ]
        keys = best(lambda: read_database("SELECT path, key FROM summaries", decode=False))
    print("| layout | write all s | read all s | read one s | write one s |")
    print("| --- | --- | --- | --- | --- |")
    for name, *values in rows:
        print(f"| {name} | " + " | ".join(v if isinstance(v, str) else f"{v:.4f}" for v in values) + " |")
    print(f"SQLite, every path and key without the summaries: {keys:.4f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
