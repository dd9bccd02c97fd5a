"""What analysing an installed library costs: the MegaMoE test engine with flashinfer-python 0.7.4 installed.

    python bench/library_cost.py [-n 3]

In one run, each timed ``-n`` times as a whole process (median, seconds), all on this machine:

* ``floor``: ``python -m lints flashinfer --no-cache --no-libraries`` in flashinfer's own tree
  (``.bench/corpus/flashinfer-0.7.4``, fetched by ``bench/corpus.py``): linting the library once;
* ``cold``: the engine with the library, no project cache and an empty user cache (every library module
  the engine reaches is read and summarised);
* ``warm``: the same engine again, caches kept (a rerun: the results cache answers);
* ``warm, no libraries``: the engine with ``--no-libraries``, its cache kept.

The engine is ``tests/test_flashinfer_installed.py``'s; the wheel is fetched as the tests fetch it.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.installed_library import FLASHINFER, fetch_wheel, install  # noqa: E402
from tests.test_flashinfer_installed import ENGINE  # noqa: E402


def timed(args: list[str], cwd: Path, env: dict, runs: int, before=None) -> float:
    times = []
    for _ in range(runs):
        if before is not None:
            before()
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "lints", *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=3)
    args = parser.parse_args()
    tree = REPO / ".bench" / "corpus" / "flashinfer-0.7.4"
    if not tree.is_dir():
        print("fetch it first: python bench/corpus.py flashinfer-0.7.4")
        return 2
    wheel, why = fetch_wheel(*FLASHINFER)
    if wheel is None:
        print(why)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        python = install(wheel, base / "venv")
        engine = base / "engine"
        for name, text in ENGINE.items():
            (engine / name).parent.mkdir(parents=True, exist_ok=True)
            (engine / name).write_text(text.replace("WARM_MODE", "torch.inference_mode()"))
        user_cache = base / "user-cache"
        env = dict(os.environ, PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(user_cache))
        lint = ["engine", "--python", str(python)]

        def forget_all() -> None:
            shutil.rmtree(user_cache, ignore_errors=True)
            shutil.rmtree(engine / ".gradmode_cache", ignore_errors=True)

        floor = timed(["flashinfer", "--no-cache", "--no-libraries"], tree, env, args.n)
        cold = timed(lint, engine, env, args.n, before=forget_all)
        timed(lint, engine, env, 1)  # fill the caches
        warm = timed(lint, engine, env, args.n)
        timed(lint + ["--no-libraries"], engine, env, 1)
        warm_alone = timed(lint + ["--no-libraries"], engine, env, args.n)
    print("| measure | median (s) | ratio |\n| --- | --- | --- |")
    print(f"| floor: flashinfer's own tree, cold | {floor:.2f} | 1 |")
    print(f"| engine + flashinfer, cold | {cold:.2f} | {cold / floor:.2f}x the floor |")
    print(f"| engine + flashinfer, warm rerun | {warm:.2f} | {warm / warm_alone:.2f}x without libraries |")
    print(f"| engine, warm rerun, --no-libraries | {warm_alone:.2f} | 1 |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
