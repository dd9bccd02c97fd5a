"""The bug class, not one bug: each shape is a small engine written for the test, in several modules, in its
buggy and its fixed form. The buggy form is reported at the right line with both chains; the fixed form is
silent; and both are run with (CPU) torch: the buggy one raises torch's exact error, the fixed one runs.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from lints.options import Config

from .helpers import as_set, expected_in_files, lint_run, run_module, write_package

ERROR = "Inplace update to inference tensor outside InferenceMode is not allowed"

WORKSPACE = (
    "import torch\n"
    "class Workspace:\n"
    "    def __init__(self):\n"
    "        self._buf = None\n"
    "    def get(self, n):\n"
    "        if self._buf is None or self._buf.shape[0] < n:\n"
    "            self._buf = torch.zeros(n)  # expect: GM202:13\n"
    "        return self._buf[:n]\n"
)
# Warmup and serving run under inference mode; the capture runs with no grad-mode context at all.
REVERSE = {
    "engine/__init__.py": "",
    "engine/workspace.py": WORKSPACE,
    "engine/runner.py":
        "import torch\n"
        "from engine.workspace import Workspace\n"
        "class CudaGraphRunner:\n"
        "    def __init__(self):\n"
        "        self.ws = Workspace()\n"
        "    @torch.inference_mode()\n"
        "    def warmup(self, x):\n"
        "        self.ws.get(x.shape[0]).copy_(x)\n"
        "    def capture(self, x):  # expect: GM106:5\n"
        "        self.ws.get(x.shape[0]).fill_(0)\n"
        "    @torch.inference_mode()\n"
        "    def execute_model(self, x):\n"
        "        out = self.ws.get(x.shape[0])\n"
        "        out.add_(x)\n"
        "        return out\n",
    "engine/main.py":
        "import torch\n"
        "from engine.runner import CudaGraphRunner\n"
        "def main():\n"
        "    runner = CudaGraphRunner()\n"
        "    x = torch.ones(4)\n"
        "    runner.warmup(x)\n"
        "    runner.capture(x)\n"
        "    print(runner.execute_model(x).tolist())\n"
        "if __name__ == '__main__':\n"
        "    main()\n",
}
# Two pipeline stages, no warmup or serving name: the first runs under inference mode, the second turns it off.
STAGES = {
    "engine/__init__.py": "",
    "engine/stages.py":
        "import torch\n"
        "class Prefill:\n"
        "    def __init__(self):\n"
        "        self._kv = None\n"
        "    def kv(self, n):\n"
        "        if self._kv is None:\n"
        "            self._kv = torch.zeros(n)  # expect: GM202:13\n"
        "        return self._kv\n"
        "    @torch.inference_mode()\n"
        "    def run(self, x):\n"
        "        return self.kv(x.shape[0]) + x\n"
        "class Decode:\n"
        "    def __init__(self, prefill: Prefill):\n"
        "        self.prefill = prefill\n"
        "    def run(self, x):\n"
        "        with torch.inference_mode(False):\n"
        "            kv = self.prefill.kv(x.shape[0])\n"
        "            kv.add_(x)\n"
        "            return kv\n",
    "engine/pipeline.py":
        "import torch\n"
        "from engine.stages import Decode, Prefill\n"
        "def main():\n"
        "    prefill = Prefill()\n"
        "    decode = Decode(prefill)\n"
        "    x = torch.ones(4)\n"
        "    prefill.run(x)\n"
        "    print(decode.run(x).tolist())\n"
        "if __name__ == '__main__':\n"
        "    main()\n",
}
# A scratch buffer zeroed on every call, after its lazy check: the first call is under inference mode
# (generate), a later one, from the driver, outside it.
EVERY_CALL = {
    "engine/__init__.py": "",
    "engine/scratch.py":
        "import torch\n"
        "class Scratch:\n"
        "    def __init__(self):\n"
        "        self._buf = None\n"
        "    def get(self, n):\n"
        "        if self._buf is None:\n"
        "            self._buf = torch.empty(n)  # expect: GM202:13\n"
        "        self._buf.zero_()\n"
        "        return self._buf\n",
    "engine/model.py":
        "import torch\n"
        "from engine.scratch import Scratch\n"
        "class Model:\n"
        "    def __init__(self):\n"
        "        self.scratch = Scratch()\n"
        "    @torch.inference_mode()\n"
        "    def generate(self, x):\n"
        "        return self.scratch.get(x.shape[0]) + x\n",
    "engine/driver.py":
        "import torch\n"
        "from engine.model import Model\n"
        "def main():\n"
        "    model = Model()\n"
        "    x = torch.ones(4)\n"
        "    model.generate(x)\n"
        "    print(model.scratch.get(4).tolist())\n"
        "if __name__ == '__main__':\n"
        "    main()\n",
}

# The model's class survives `.to(...)` and `.eval()`: warmup reaches its lazy buffer through `self.model(x)`.
TYPES = {
    "engine/__init__.py": "",
    "engine/model.py":
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self._out = None\n"
        "    def forward(self, x):\n"
        "        if self._out is None:\n"
        "            self._out = torch.empty_like(x)  # expect: GM202:13\n"
        "        self._out.copy_(x)\n"
        "        return self._out\n",
    "engine/runner.py":
        "import torch\n"
        "from engine.model import Model\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.model = Model().to('cpu').eval()\n"
        "    def warmup(self, x):\n"
        "        with torch.inference_mode():  # expect: GM101:14\n"
        "            self.model(x)\n"
        "    @torch.no_grad()\n"
        "    def execute_model(self, x):\n"
        "        return self.model(x)\n"
        "def main():\n"
        "    runner = Runner()\n"
        "    runner.warmup(torch.ones(4))\n"
        "    print(runner.execute_model(torch.ones(4)).tolist())\n"
        "if __name__ == '__main__':\n"
        "    main()\n",
}

FIXED = {
    # the upstream fix of the reverse direction: the capture entry runs under inference mode too
    "reverse": (REVERSE, "engine/runner.py", "    def capture(self, x):  # expect: GM106:5\n",
                "    @torch.inference_mode()\n    def capture(self, x):\n"),
    # the second stage keeps inference mode on, as the first
    "stages": (STAGES, "engine/stages.py", "torch.inference_mode(False)", "torch.inference_mode()"),
    # the buffer is zeroed only where it is allocated: on the allocating call, in its own mode
    "every-call": (EVERY_CALL, "engine/scratch.py", "            self._buf = torch.empty(n)  # expect: GM202:13\n"
                   "        self._buf.zero_()\n", "            self._buf = torch.empty(n)\n"
                   "            self._buf.zero_()\n"),
    # the upstream fix of SGLang #33470: warmup lets the caller's grad mode decide
    "types": (TYPES, "engine/runner.py", "        with torch.inference_mode():  # expect: GM101:14\n",
              "        with torch.no_grad():\n"),
}
MAIN = {"reverse": "engine.main", "stages": "engine.pipeline", "every-call": "engine.driver", "types": "engine.runner"}
SHAPES = {"reverse": REVERSE, "stages": STAGES, "every-call": EVERY_CALL, "types": TYPES}


def fixed(shape: str) -> dict[str, str]:
    files, path, old, new = FIXED[shape]
    assert old in files[path]
    out = {name: text.replace(old, new) if name == path else text for name, text in files.items()}
    return {name: text.replace("  # expect: GM202:13", "") for name, text in out.items()}


def run_engine(folder, module: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module], cwd=folder, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shape_is_found_and_its_fixed_form_is_silent(tmp_path, shape):
    buggy = lint_run(tmp_path / "buggy", SHAPES[shape], Config())
    assert not buggy.errors and as_set(buggy.findings) == expected_in_files(SHAPES[shape])
    good = lint_run(tmp_path / "fixed", fixed(shape), Config())
    assert not good.errors and as_set(good.findings) == expected_in_files(fixed(shape)) == set()


@pytest.mark.e2e  # runs the engine under CPU torch in a process of its own
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shape_crashes_under_torch_and_its_fixed_form_runs(tmp_path, shape):
    pytest.importorskip("torch")
    write_package(tmp_path / "buggy", SHAPES[shape])
    crash = run_engine(tmp_path / "buggy", MAIN[shape])
    assert crash.returncode != 0 and ERROR in crash.stderr, crash.stderr[-2000:]
    write_package(tmp_path / "fixed", fixed(shape))
    ok = run_engine(tmp_path / "fixed", MAIN[shape])
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_reverse_direction_names_both_chains(tmp_path):
    run = lint_run(tmp_path, REVERSE, Config())
    (gm202,) = [f for f in run.findings if f.code == "GM202"]
    assert "allocated under inference mode: `@torch.inference_mode()` in `CudaGraphRunner.warmup()` at " \
           "engine/runner.py:6" in gm202.notes
    assert "updated in place: `.fill_()` in `CudaGraphRunner.capture()` at engine/runner.py:10" in gm202.notes
    off = gm202.notes.index("updated in place: `.fill_()` in `CudaGraphRunner.capture()` at engine/runner.py:10") + 1
    assert gm202.notes[off:off + 3] == (
        "outside inference mode: no grad-mode context (`if __name__ == \"__main__\"`) in module level at "
        "engine/main.py:10",
        "  module level calls `main()` at engine/main.py:10",
        "  `main()` calls `CudaGraphRunner.capture()` at engine/main.py:7")
    assert gm202.notes[-1].startswith("fix: run the update's path under inference mode too")
    (gm106,) = [f for f in run.findings if f.code == "GM106"]
    assert gm106.fixable == "unsafe"
    assert "  `main()` calls `CudaGraphRunner.capture()` at engine/main.py:7" in gm106.notes


@pytest.mark.e2e  # runs the engine under CPU torch in a process of its own
def test_reverse_direction_unsafe_fix_adds_the_decorator_and_the_engine_runs(tmp_path):
    pytest.importorskip("torch")
    folder = write_package(tmp_path, REVERSE)
    safe = run_module("lints.codemod", ".", cwd=folder)
    assert "@torch.inference_mode()\n    def capture" not in (folder / "engine/runner.py").read_text(), safe.stdout
    fix = run_module("lints.codemod", "--unsafe-fixes", ".", cwd=folder)
    assert fix.returncode == 0, fix.stdout + fix.stderr
    text = (folder / "engine/runner.py").read_text()
    assert "    @torch.inference_mode()\n    def capture(self, x):  # expect: GM106:5\n" in text
    ok = run_engine(folder, "engine.main")
    assert ok.returncode == 0 and ok.stdout.strip() == "[1.0, 1.0, 1.0, 1.0]", ok.stderr[-2000:]
    lint = run_module("lints", ".", cwd=folder)
    assert lint.returncode == 0, lint.stdout


def test_unknown_entry_makes_no_finding_unless_configured(tmp_path):
    """A plugin: the host calls `generate` under inference mode and `update` with grad on. No project code
    calls either, so the modes are unknown and nothing is reported, until `entry-grad-mode` says."""
    files = {
        "plugin/__init__.py": "",
        "plugin/layer.py":
            "import torch\n"
            "class Layer:\n"
            "    def __init__(self):\n"
            "        self._cache = None\n"
            "    def generate(self, x):\n"
            "        if self._cache is None:\n"
            "            self._cache = torch.zeros_like(x)\n"
            "        return self._cache + x\n"
            "    def update(self, x):\n"
            "        with torch.no_grad():\n"
            "            self._cache.copy_(x)\n",
    }
    assert lint_run(tmp_path / "unknown", files, Config()).findings == []
    run = lint_run(tmp_path / "host", files, Config(entry_grad_mode="inference_mode"))
    assert [(f.code, f.path, f.line) for f in run.findings] == []  # the update keeps inference mode on: no_grad
    files["plugin/layer.py"] = files["plugin/layer.py"].replace("torch.no_grad()", "torch.inference_mode(False)")
    run = lint_run(tmp_path / "off", files, Config(entry_grad_mode="inference_mode"))
    assert [(f.code, f.path, f.line) for f in run.findings] == [("GM202", "plugin/layer.py", 7)]


NEWER_SYNTAX = {
    "engine/__init__.py": "",
    "engine/pool.py":
        "import torch\n"
        "type Shape = tuple[\n"
        "    int, ...]\n"
        "class Pool[T]:\n"
        "    def __init__(self):\n"
        "        self._buf = None\n"
        "    def get[U](self, n: U) -> torch.Tensor:\n"
        "        label = f\"{'pool'} {{n}} {f\"{n:>{4}}\"}\"\n"
        "        if self._buf is None:\n"
        "            self._buf = torch.zeros(n)  # expect: GM202:13\n"
        "        return self._buf\n",
    "engine/run.py":
        "import torch\n"
        "from engine.pool import Pool\n"
        "POOL = Pool()\n"
        "@torch.inference_mode()\n"
        "def generate(x):\n"
        "    return POOL.get(4) + x\n"
        "def main():\n"
        "    generate(torch.ones(4))\n"
        "    POOL.get(4).add_(1)\n"
        "if __name__ == '__main__':\n"
        "    main()\n",
}


def test_syntax_newer_than_the_interpreter_is_summarised_in_place(tmp_path):
    """PEP 695 aliases and type parameters and a PEP 701 f-string (quotes nested in their own kind): on
    Python 3.11 `ast` refuses the file; libcst reads it, and the finding is at the file's own line."""
    run = lint_run(tmp_path, NEWER_SYNTAX, Config())
    assert not run.errors, run.errors
    assert as_set(run.findings) == expected_in_files(NEWER_SYNTAX)
