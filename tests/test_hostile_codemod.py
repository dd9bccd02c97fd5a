"""The codemod against a hostile checkout and hostile sizes (issue 32): a planted cache must not steer a
write, a walked symlink must not carry a write out of the project, every fix form must compute what the
code computed before, and a big module must be fixed in linear time and bounded memory."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import libcst
import pytest

from lints import codemod, file_fixes, fixer
from lints.file_fixes import FixOptions, fix_text
from lints.summary_jobs import file_key
from lints.sources import source_from_text
from lints.options import Config

from .helpers import FIXTURES, ROOT, cache_fact, cache_rows, chdir, write_cache_fact, write_cache_rows

WARM = ("import torch\n"
        "def warmup(model, x):\n"
        "    with torch.inference_mode():\n"
        "        return model(x)\n")
WARM_FIXED = ("import torch\n"
              "def warmup(model, x):\n"
              "    return model(x)\n")

# A runner whose warmup enters inference mode (a real GM101) and whose serving entry runs under
# no_grad, which nothing flags: line 10 is `with torch.no_grad():`, its item at column 13.
RUNNER = ("import torch\n"
          "\n"
          "\n"
          "class ModelRunner:\n"
          "    def warmup(self, model, x):\n"
          "        with torch.inference_mode():\n"
          "            return model(x)\n"
          "\n"
          "    def execute_model(self, model, x):\n"
          "        with torch.no_grad():\n"
          "            return model(x)\n")
SERVING_BLOCK = "        with torch.no_grad():\n            return model(x)\n"


def run_in(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m ARGS`` in ``cwd`` with the project's own cache, ``<root>/.gradmode_cache``, as a
    checkout can ship it (no $GRADMODE_CACHE_DIR)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("GRADMODE_CACHE_DIR", None)
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=300)


def runner_project(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text("[tool.gradmode]\n")
    path = folder / "runner.py"
    path.write_text(RUNNER)
    return path


def linted_lines(folder: Path, spelling: str = ".") -> list[tuple[int, str]]:
    proc = run_in(folder, "lints", "--format", "json", spelling)
    assert proc.returncode in (0, 1), proc.stderr
    return sorted((f["line"], f["code"]) for f in json.loads(proc.stdout)["findings"])


# 1. The caches are the checkout's: what they say must not choose what is written -----------------------

def plant_results(folder: Path, spelling: str = ".") -> None:
    """Rewrite the cached results as a hostile checkout can (its digest is built from public inputs): the
    real finding hidden, a fake one at the serving `torch.no_grad()` block with a fix that unwraps it.
    ``spelling``: the path as the run to deceive will spell it (the digest holds the paths)."""
    assert run_in(folder, "lints", spelling).returncode == 1  # writes the cache
    data = cache_fact(folder / ".gradmode_cache", "results")
    (real,) = data["findings"]
    assert real["line"] == 6
    data["findings"] = [dict(real, line=10, col=13, message="`with torch.inference_mode()` in warm path",
                             fixes=[{"action": "unwrap_with", "at": [10, 8], "safe": True, "items": [[10, 13]]}])]
    write_cache_fact(folder / ".gradmode_cache", "results", data)
    assert linted_lines(folder, spelling) == [(10, "GM101")], "the planted results are no longer read"


@pytest.mark.parametrize("mode", ["write", "diff"])
def test_planted_results_cannot_make_the_codemod_unwrap_a_serving_block(tmp_path, mode):
    path = runner_project(tmp_path)
    plant_results(tmp_path)
    proc = run_in(tmp_path, "lints.codemod", *(["--diff"] if mode == "diff" else []), ".")
    assert "Traceback" not in proc.stderr
    if mode == "diff":
        assert proc.returncode == 1, proc.stderr
        assert "-        with torch.no_grad():\n" not in proc.stdout
        assert "-        with torch.inference_mode():\n" in proc.stdout
        assert path.read_text() == RUNNER
    else:
        assert proc.returncode == 0, proc.stderr
        # the real finding is fixed, from a fresh analysis; the serving block is as it was
        assert path.read_text() == RUNNER.replace(
            "        with torch.inference_mode():\n            return model(x)\n", "        return model(x)\n")
        assert SERVING_BLOCK in path.read_text()


def test_planted_results_cannot_steer_the_libcst_command(tmp_path):
    path = runner_project(tmp_path)
    plant_results(tmp_path, str(tmp_path))  # the command analyses the project by its absolute path
    proc = run_in(tmp_path, "libcst.tool", "codemod", "-x", "--no-format", "-j1",
                  "codemods.gradmode.FixInferenceMode", ".")
    assert proc.returncode == 0, proc.stderr
    assert SERVING_BLOCK in path.read_text() and "inference_mode" not in path.read_text()


def test_a_planted_summary_of_the_file_being_fixed_is_not_trusted(tmp_path):
    """A summary planted under the file's own content key (the hash of public bytes) that places a warm
    inference-mode block where the file has its serving no_grad block."""
    path = runner_project(tmp_path)
    path.write_text(RUNNER.replace("def execute_model", "def warmup_all").replace("torch.no_grad()",
                                                                                  "torch.inference_mode()"))
    assert run_in(tmp_path, "lints", ".").returncode == 1  # the lie's summary, by the tool itself
    path.write_text(RUNNER)
    cache = tmp_path / ".gradmode_cache"
    write_cache_fact(cache, "results", None)
    summaries = cache_rows(cache)
    (entry,) = summaries.values()
    entry[0] = file_key(RUNNER.encode())
    write_cache_rows(cache, summaries)
    assert linted_lines(tmp_path) == [(6, "GM101"), (10, "GM101")], "the planted summary is no longer read"
    proc = run_in(tmp_path, "lints.codemod", ".")
    assert proc.returncode == 0, proc.stderr
    assert SERVING_BLOCK in path.read_text() and "inference_mode" not in path.read_text()
    assert "does not match" in proc.stderr


# 2. A file reached through a symbolic link ---------------------------------------------------------

def test_a_walked_symlink_to_a_file_outside_the_project_is_not_written_through(tmp_path):
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "pyproject.toml").write_text("[tool.gradmode]\n")
    target = outside / "target.py"
    target.write_text(WARM)
    (project / "real.py").write_text(WARM)
    (project / "link.py").symlink_to(os.path.join("..", "outside", "target.py"))
    proc = run_in(project, "lints.codemod", ".")
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if ": error:" in line]
    assert len(errors) == 1 and errors[0].startswith("link.py: error: "), proc.stderr
    assert "outside the project" in errors[0]
    assert target.read_text() == WARM  # left alone
    assert (project / "real.py").read_text() == WARM_FIXED  # the others are still fixed
    # named on the command line, it is the user's choice: written through
    proc = run_in(project, "lints.codemod", "link.py")
    assert proc.returncode == 0, proc.stderr
    assert target.read_text() == WARM_FIXED and (project / "link.py").is_symlink()


def test_the_libcst_command_does_not_write_through_a_symlink_out_of_the_project(tmp_path):
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "pyproject.toml").write_text("[tool.gradmode]\n")
    target = outside / "target.py"
    target.write_text(WARM)
    (project / "real.py").write_text(WARM)
    (project / "link.py").symlink_to(os.path.join("..", "outside", "target.py"))
    proc = run_in(project, "libcst.tool", "codemod", "-x", "--no-format", "-j1",
                  "codemods.gradmode.FixInferenceMode", ".")
    assert proc.returncode != 0
    assert "OutsideTheProject: " in proc.stderr and "outside the project" in proc.stderr, proc.stderr
    assert target.read_text() == WARM and (project / "real.py").read_text() == WARM_FIXED


# 3. Every fix form computes what the code computed (only the grad mode it runs under changes) ----------

def _warmup(namespace, model, x):
    return namespace["warmup"](model, x)


def _worker_autotune(namespace, model, x):
    worker = namespace["Worker"](model, x)
    worker.autotune_kernels()
    return worker.out


# name -> (source, how to run it, whether the fixed code runs the model under inference mode)
FORMS = {
    "with": (WARM, _warmup, False),
    "with, one item of two": ("import contextlib, torch\ndef warmup(model, x):\n"
                              "    with torch.inference_mode(), contextlib.nullcontext():\n"
                              "        return model(x)\n", _warmup, False),
    "with as": ("import torch\ndef warmup(model, x):\n    with torch.inference_mode() as mode:\n"
                "        return model(x), mode\n", _warmup, False),
    "enter_context": ("import contextlib, torch\ndef warmup(model, x):\n"
                      "    with contextlib.ExitStack() as stack:\n"
                      "        stack.enter_context(torch.inference_mode())\n        return model(x)\n", _warmup, False),
    "context object": ("import torch\ndef warmup(model, x):\n    ctx = torch.inference_mode()\n    with ctx:\n"
                       "        return model(x)\n", _warmup, False),
    "callable, called at once": ("import torch\ndef warmup(model, x):\n"
                                 "    return torch.inference_mode()(model)(x)\n", _warmup, False),
    "callable, bound": ("import torch\ndef warmup(model, x):\n    run = torch.inference_mode()(model)\n"
                        "    return run(x)\n", _warmup, False),
    "callable through getattr": ("import torch\ndef warmup(model, x):\n"
                                 "    return getattr(torch, 'inference_mode')()(model)(x)\n", _warmup, False),
    "callable through getattr, mode given": ("import torch\ndef warmup(model, x):\n"
                                             "    return getattr(torch, 'inference_mode')(True)(model)(x)\n",
                                             _warmup, False),
    "callable of a bare name": ("from torch import inference_mode\nimport torch\ndef warmup(model, x):\n"
                                "    return inference_mode()(model)(x)\n", _warmup, False),
    "decorator": ("import torch\n@torch.inference_mode()\ndef warmup(model, x):\n    return model(x)\n",
                  _warmup, False),
    "warm call under a with": ("import torch\ndef warmup(model, x):\n    with torch.inference_mode():\n"
                               "        return kernel_warmup(model, x)\n"
                               "def kernel_warmup(model, x):\n    return model(x)\n", _warmup, False),
    "warm call under a decorator": ("import torch\n@torch.inference_mode()\ndef warmup(model, x):\n"
                                    "    model(x)\n    return kernel_warmup(model, x)\n"
                                    "def kernel_warmup(model, x):\n    return model(x)\n", _warmup, False),
    "capture entry outside inference mode": (
        "import threading, torch\nclass Worker:\n    def __init__(self, model, x):\n"
        "        self.model, self.x = model, x\n"
        "    @torch.inference_mode()\n    def execute_model(self, x):\n        return self.model(x)\n"
        "    @torch.inference_mode()\n    def kernel_warmup(self):\n        self.model(self.x)\n"
        "    def start(self):\n        self.kernel_warmup()\n"
        "        threading.Thread(target=self.autotune_kernels).start()\n"
        "    def autotune_kernels(self):\n        self.out = self.model(self.x)\n", _worker_autotune, True),
}
# --style no_grad would write `torch.no_grad` where `torch` is read bare (`getattr(torch, ...)`): refused
NOT_FIXED = {("callable through getattr", "no_grad"), ("callable through getattr, mode given", "no_grad")}


def fixed_alone(source: str, style: str) -> str:
    new, remaining, error = fix_text(source_from_text("a.py", source),
                                     FixOptions(Config(), style=style, unsafe_fixes=True, write=False))
    assert error is None, error
    assert new is not None and not remaining, remaining
    return new


def outcome(source: str, run) -> tuple[list, list]:
    """(what the code returned, the (grad, inference) modes its model ran under), on CPU torch."""
    import torch

    modes: list = []

    def model(x):
        modes.append((torch.is_grad_enabled(), torch.is_inference_mode_enabled()))
        return x * 2 + 1

    namespace: dict = {}
    exec(compile(source, "a.py", "exec"), namespace)
    result = run(namespace, model, torch.arange(4.0))
    values = [v.tolist() if isinstance(v, torch.Tensor) else v for v in (result if isinstance(result, tuple)
                                                                         else (result,))]
    return values, modes


@pytest.mark.parametrize("style", ["remove", "no_grad"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_fix_form_computes_what_the_code_did(form, style):
    source, run, under_inference = FORMS[form]
    if (form, style) in NOT_FIXED:
        pytest.skip("refused by design (test_codemod: the name torch is read bare)")
    fixed = fixed_alone(source, style)
    assert fixed != source
    before, before_modes = outcome(source, run)
    after, after_modes = outcome(fixed, run)
    assert after == before, fixed
    assert before_modes and all(inference != under_inference for _grad, inference in before_modes)
    assert after_modes and all(inference == under_inference for _grad, inference in after_modes), fixed


# 4. A big module: fixed a piece at a time, as the whole module would be -------------------------------

def _bench():
    """bench/codemod_scale.py, for its generated module (one source for the test and the bench)."""
    spec = importlib.util.spec_from_file_location("codemod_scale", ROOT / "bench" / "codemod_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ParseCounter:
    """The length of every text handed to libcst's parser (its tree takes ~500 bytes a byte of it)."""

    def __init__(self, monkeypatch) -> None:
        self.sizes: list[int] = []
        parse = libcst.parse_module

        def counting(source, *args, **kwargs):
            self.sizes.append(len(source))
            return parse(source, *args, **kwargs)

        monkeypatch.setattr(libcst, "parse_module", counting)


def fixed_both_ways(monkeypatch, text: str, style: str = "remove", unsafe: bool = True, piece_chars: int = 1):
    """(``fix_text`` of the whole module, ``fix_text`` a piece at a time, the sizes libcst parsed then)."""
    options = FixOptions(Config(), style=style, unsafe_fixes=unsafe, write=False)
    whole = fix_text(source_from_text("a.py", text), options)
    monkeypatch.setattr(file_fixes, "PIECES_MIN_CHARS", 0)
    monkeypatch.setattr(fixer, "PIECE_CHARS", piece_chars)  # 1: a cut at every start that parses
    counter = ParseCounter(monkeypatch)
    in_pieces = fix_text(source_from_text("a.py", text), options)
    monkeypatch.undo()
    return whole, in_pieces, counter.sizes


# comments around the blocks a fix unwraps, imports to add (`contextlib`) and to remove (`inference_mode`),
# `def`/`class` lines inside a string (no cut there), a decorator, a docstring, module-level code
TRICKY = '''"""A module whose pieces must give what the whole gives."""
from __future__ import annotations

import os
from torch import inference_mode
import torch

TEMPLATE = """
def not_a_function():
    with torch.inference_mode():
        pass
class NotAClass:
@decorator
"""


@inference_mode()
def warmup_decorated(model):
    return model()


class Runner:
    def warmup(self, model):
        with torch.inference_mode() as mode:  # the fix keeps `mode` bound
            return model(), mode
        # trailing comment of the block

    # comment at the class's level


# comment between two statements
def autotune(model):
    with inference_mode():
        # inside
        model()
        # after, inside
    # after, outside


@staticmethod
def dummy_run(model):
    with torch.inference_mode(), os.fdopen(0) as stdin:
        model(stdin)
print(os.sep)
'''


@pytest.mark.parametrize("style", ["remove", "no_grad"])
def test_pieces_give_what_the_whole_module_gives(monkeypatch, style):
    whole, in_pieces, sizes = fixed_both_ways(monkeypatch, TRICKY, style)
    assert whole[0] is not None and whole[2] is None, whole
    assert in_pieces == whole
    assert max(sizes) < len(TRICKY) / 2  # cut into pieces, not parsed whole
    if style == "remove":  # the import the fixes left unused goes, the one they need comes, as whole
        assert "from torch import inference_mode\n" not in whole[0] and "import contextlib\n" in whole[0]


FIX_PAIRS = sorted(p.name[: -len(".in.py")] for p in (FIXTURES / "fix").glob("*.in.py"))


@pytest.mark.parametrize("name", FIX_PAIRS)
def test_pieces_give_what_the_whole_module_gives_on_the_fix_fixtures(monkeypatch, name):
    text = (FIXTURES / "fix" / f"{name}.in.py").read_text()
    args = text.splitlines()[0] if text.startswith("# fix-args:") else ""
    whole, in_pieces, _sizes = fixed_both_ways(monkeypatch, text, "no_grad" if "no_grad" in args else "remove",
                                               "--unsafe-fixes" in args)
    assert in_pieces == whole


def test_a_big_module_is_fixed_in_bounded_pieces_with_linear_work(monkeypatch):
    """4x the classes: every libcst parse stays the size of one piece (the whole module's tree took
    3.5 GB on 5 MB and collecting among its nodes made the fix superlinear), the text parsed in all
    grows 4x, and the fix is what the whole module's fix is. Counted, not timed: CI machines are loaded."""
    generated = _bench().generated_module
    work = {}
    for classes in (40, 160):
        text = generated(classes)
        whole, in_pieces, sizes = fixed_both_ways(monkeypatch, text, piece_chars=2048)
        assert in_pieces == whole and "inference_mode" not in in_pieces[0] and not in_pieces[1]
        work[classes] = (len(text), max(sizes), sum(sizes))
    (small_text, small_largest, small_total), (big_text, big_largest, big_total) = work[40], work[160]
    assert big_text > 3.9 * small_text
    assert small_largest < 2048 + 1024 and big_largest < 2048 + 1024  # a piece and a class at most
    assert big_total <= 4.4 * small_total


@pytest.mark.slow
def test_a_module_over_the_threshold_is_fixed_in_pieces_by_the_codemod(tmp_path, monkeypatch):
    """Without any setting lowered (a 170 kB module): the codemod parses no text near the module's size."""
    text = _bench().generated_module(600)
    path = tmp_path / "a.py"
    path.write_text(text)
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\n")
    counter = ParseCounter(monkeypatch)
    with chdir(tmp_path):
        assert codemod.main(["-q", "-j1", "--no-cache", "a.py"]) == 0
    assert "inference_mode" not in path.read_text()
    assert max(counter.sizes) < len(text) / 2, max(counter.sizes)  # the module is two and a half pieces
    assert len(text) >= fixer.PIECES_MIN_CHARS and max(counter.sizes) <= 2 * fixer.PIECE_CHARS
