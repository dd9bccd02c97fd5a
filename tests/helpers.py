"""Shared helpers: expected findings written as `# expect: CODE:COL` comments on the offending line."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from lints.config import Config

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*(?P<items>(?:GM\d{3}:\d+\s*)+)")
# Every rule on, opt-in ones included: rule fixtures must show what each rule finds.
ALL_ON = Config(extend_select=("GM2",))


def expected_findings(source: str) -> set[tuple[str, int, int]]:
    """{(code, line, 1-based column)} from `# expect: GM101:14 GM202:9` comments."""
    out = set()
    for lineno, line in enumerate(source.splitlines(), 1):
        match = EXPECT.search(line)
        if match:
            for item in match.group("items").split():
                code, col = item.split(":")
                out.add((code, lineno, int(col)))
    return out


def run_module(*args: str, cwd: Path | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               GRADMODE_CACHE_DIR=str((cwd or ROOT) / ".gradmode_cache_test"))
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd or ROOT, capture_output=True, text=True,
                          env=env, input=input, timeout=300)
