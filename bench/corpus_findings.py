"""What the linter reports on the benchmark corpora, with default settings.

    python bench/corpus_findings.py               # sglang 0.5.15, sglang 0.5.23, vllm 0.11.0
    python bench/corpus_findings.py vllm-0.11.0

For each tree (fetched by ``bench/corpus.py``) it runs, in the tree's project folder
(whose marker ``pyproject.toml`` has an empty ``[tool.gradmode]`` table: default settings)::

    python -m lints PACKAGE --format json --no-cache

and prints the findings per code and severity, the errors, and the inferred serving grad mode.
``--no-cache`` only keeps a cache out of the corpus folder; it does not change the findings.
Checks (exit 1 when one fails): sglang 0.5.15 reports GM101 at
``sglang/srt/model_executor/runner/flashinfer_autotune.py:179`` and ``.../base_runner.py:565``;
sglang 0.5.23 reports neither file. Markdown tables on stdout; the reports go to
``.bench/results/findings-<tree>.json``.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RUNNER = "sglang/srt/model_executor/runner"
EXPECTED_015 = [(f"{RUNNER}/flashinfer_autotune.py", 179, "GM101"), (f"{RUNNER}/base_runner.py", 565, "GM101")]


def lint(name: str) -> tuple[dict, float, int]:
    package = corpus.CORPORA[name][2]
    env = {k: v for k, v in os.environ.items() if k not in ("GRADMODE_CACHE_DIR", "PYTHONPATH")}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "lints", package, "--format", "json", "--no-cache", "-q"],
                          cwd=corpus.project_dir(name), env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1, 2) or not proc.stdout.strip():
        raise SystemExit(f"bench: lint of {name} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout), wall, proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(corpus.CORPORA) + " (default: all)")
    args = parser.parse_args(argv)
    names = args.names or list(corpus.CORPORA)
    out_dir = REPO / ".bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    reports = {}
    for name in names:
        corpus.ensure(name)
        report, wall, rc = lint(name)
        reports[name] = report
        (out_dir / f"findings-{name}.json").write_text(json.dumps(report, indent=1))
        findings = report["findings"]
        by_code = collections.Counter((f["code"], f["severity"]) for f in findings)
        serving = report.get("serving_grad_mode") or {}
        files = len(list(corpus.tree(name).rglob("*.py")))
        print(f"\n### {name}: {files} files, {len(findings)} finding(s), {len(report['errors'])} error(s), "
              f"exit {rc}, {wall:.1f} s\n")
        print(f"serving grad mode: {serving.get('mode')} ({serving.get('source')}: {serving.get('evidence')})\n")
        print("| code | severity | findings | files |\n| --- | --- | --- | --- |")
        for (code, severity), count in sorted(by_code.items()):
            nfiles = len({f["path"] for f in findings if f["code"] == code and f["severity"] == severity})
            print(f"| {code} | {severity} | {count} | {nfiles} |")
        for f in findings:
            print(f"    {f['path']}:{f['line']}:{f['col']}: {f['code']} {f['message'][:110]}")
        for e in report["errors"]:
            print(f"    error: {e['path']}: {e['message']}")
    failed = []
    if "sglang-0.5.15" in reports:
        got = {(f["path"], f["line"], f["code"]) for f in reports["sglang-0.5.15"]["findings"]}
        for want in EXPECTED_015:
            ok = want in got
            print(f"check sglang-0.5.15 reports {want[2]} at {want[0]}:{want[1]}: {'ok' if ok else 'FAILED'}")
            failed += [] if ok else [want]
    if "sglang-0.5.23" in reports:
        paths = {f["path"] for f in reports["sglang-0.5.23"]["findings"]}
        for path, _, _ in EXPECTED_015:
            ok = path not in paths
            print(f"check sglang-0.5.23 reports nothing in {path}: {'ok' if ok else 'FAILED'}")
            failed += [] if ok else [path]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
