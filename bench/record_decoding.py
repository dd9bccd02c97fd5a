"""What named summary records would cost: decode time and memory of one tree's summaries, three ways.

    python bench/record_decoding.py [TREE]        # default sglang-0.5.23 (fetched by bench/corpus.py)

Summarises every file of the tree in this process (not timed), encodes each summary as the JSON text the
summaries cache holds, then decodes all of them (timed, and measured with tracemalloc) as:
- ``lists``: ``json.loads``, records as positional lists read through index constants (today);
- ``namedtuples``: the same, then every record turned into the NamedTuples of ``lints/summary_records.py``
  (``with_records``: what the linter does since; still JSON arrays when encoded);
- ``msgspec``: ``msgspec.json.decode`` into typed ``Struct``s with ``array_like=True`` (the same JSON
  text, validated on the way in); skipped when msgspec is not installed (it is no dependency of ours).
Prints a table: seconds (best of 3), peak MiB while decoding.
"""


import gc
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import corpus  # noqa: E402

from lints.sources import read_source  # noqa: E402
from lints.summary_jobs import summarize_source  # noqa: E402
from lints.summary_records import with_records  # noqa: E402


try:
    import msgspec
except ImportError:  # no dependency of ours: measured where installed
    msgspec = None

if msgspec is not None:
    class MCall(msgspec.Struct, array_like=True):
        func: Any
        args: list
        kwargs: dict
        line: int
        col: int
        with_index: int
        guard: int

    class MAssign(msgspec.Struct, array_like=True):
        target: Any
        value: Any
        op: Optional[str]
        line: int
        col: int
        with_index: int
        guard: int

    class MReturn(msgspec.Struct, array_like=True):
        value: Any
        line: int
        col: int
        with_index: int
        is_yield: bool

    class MItem(msgspec.Struct, array_like=True):
        expr: Any
        line: int
        col: int
        has_as: bool

    class MWith(msgspec.Struct, array_like=True):
        line: int
        col: int
        items: list[MItem]
        parent: int
        is_enter_context: bool
        end_line: int
        statements: Any
        bare_calls: Any
        inner_withs: Any

    class MGuard(msgspec.Struct, array_like=True):
        names: list[str]
        parent: int
        in_orelse: bool
        line: int
        present: list[str]

    class MDecorator(msgspec.Struct, array_like=True):
        expr: Any
        line: int
        col: int

    class MFunction(msgspec.Struct):
        name: str
        qual: str
        line: int
        col: int
        cls: Optional[str]
        parent: Optional[str]
        params: list[str]
        ann: dict[str, str]
        defaults: dict[str, Any]
        dec: list[MDecorator]
        calls: list[MCall]
        withs: list[MWith]
        rets: list[MReturn]
        assigns: list[MAssign]
        guards: list[MGuard]
        imports: dict[str, str]
        globals: list[str]
        locals: list[str]
        nested: list[str]
        notable: list[int]
        blocks: list[list[int]]
        ret: Any = None

    class MModule(msgspec.Struct):
        schema: int
        module: str
        package: bool
        path: str
        star: list[str]
        functions: dict[str, MFunction]
        classes: dict[str, dict[str, Any]]


def _msgspec_decoder():
    return msgspec.json.Decoder(MModule).decode if msgspec is not None else None


def _measure(decode, texts: list[str]) -> tuple[float, float]:
    best = float("inf")
    for _ in range(3):
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        decoded = [decode(t) for t in texts]
        best = min(best, time.perf_counter() - start)
        gc.enable()
        del decoded
    gc.collect()
    tracemalloc.start()
    decoded = [decode(t) for t in texts]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del decoded
    return best, peak / 2 ** 20


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "sglang-0.5.23"
    root = corpus.ensure(name)
    texts = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for file in sorted(files):
            if file.endswith(".py"):
                source = read_source(os.path.join(folder, file))
                summary = summarize_source(source, "m", False) if not hasattr(source, "message") else None
                if isinstance(summary, dict):
                    texts.append(json.dumps(summary, separators=(",", ":")))
    print(f"{name}: {len(texts)} summaries, {sum(map(len, texts)) / 2 ** 20:.1f} MiB of JSON")
    ways = {"lists": json.loads, "namedtuples": lambda t: with_records(json.loads(t))}
    decoder = _msgspec_decoder()
    if decoder is not None:
        ways["msgspec"] = decoder
    print("| records | decode s (best of 3) | peak MiB |")
    print("| --- | --- | --- |")
    for way, decode in ways.items():
        seconds, peak = _measure(decode, texts)
        print(f"| {way} | {seconds:.2f} | {peak:.0f} |")


if __name__ == "__main__":
    main()
