"""Robustness: generated programs, a real tree round trip, determinism and bad input.

Bounded in time (the whole file runs in well under a minute on 2 cores).
``GRADMODE_FUZZ_EXAMPLES=N`` raises the number of generated programs per
property (default 150) for a longer local run, e.g. ``GRADMODE_FUZZ_EXAMPLES=3000``.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import hypothesis.strategies as st
import libcst as cst
import pyflakes.api
import pyflakes.messages
import pyflakes.reporter
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings

from lints.file_fixes import FixOptions, fix_text
from lints.options import Config
from lints.engine import lint_project
from lints.sources import SourceFile, read_source
from lints.model import FileError

# Generated programs are full of `"x"()` and "\\d": compiling them warns, which is not our concern.
pytestmark = [pytest.mark.filterwarnings("ignore::SyntaxWarning"),
              pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")]

REPO = Path(__file__).resolve().parent.parent
GEN_PATH = "<set below>"
FUZZ_EXAMPLES = int(os.environ.get("GRADMODE_FUZZ_EXAMPLES", "200"))
FIX_RULES = ("GM101", "GM102", "GM103")
CONFIG = Config()
CONFIG_IM = Config(serving_grad_mode="inference_mode")

_common = dict(deadline=None, derandomize=os.environ.get("GRADMODE_FUZZ_RANDOM") is None,  # CI: same programs
               suppress_health_check=list(HealthCheck), database=None,
               # no shrinking in CI: a failure is reported as generated (shrinking took > 5 minutes)
               phases=[Phase.explicit, Phase.reuse, Phase.generate] + (
                   [Phase.shrink] if os.environ.get("GRADMODE_FUZZ_SHRINK") else []))
# Random programs rarely reach the rules and are cheap; programs built from grad-mode snippets are
# parsed, linted, fixed and re-fixed, which costs ~0.3 s each (see bench/RESULTS.md on fix_text's speed).
fuzz_settings = settings(max_examples=FUZZ_EXAMPLES, **_common)
snippet_settings = settings(max_examples=max(10, FUZZ_EXAMPLES // 8), **_common)
mixed_settings = settings(max_examples=max(5, FUZZ_EXAMPLES // 10), **_common)


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
def source_of(text: str, path: str = "") -> SourceFile:
    return SourceFile(path or GEN_PATH, text, "utf-8", text.encode("utf-8"))


def assert_parses(text: str, what: str = "fixed code") -> None:
    try:
        cst.parse_module(text)
        compile(text, "<fixed>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except Exception as exc:  # pragma: no cover - the message is the point
        raise AssertionError(f"{what} does not parse: {exc}\n---\n{text}") from exc


# One small project for the generated programs: gen.py's text is handed to lint_project as an override
# (nothing is written per example), the project around it is empty.
_GEN_DIR = tempfile.mkdtemp(prefix="gradmode-fuzz-")
Path(_GEN_DIR, "pyproject.toml").write_text("")
GEN = os.path.join(_GEN_DIR, "gen.py")
Path(GEN).write_text("")
GEN_PATH = GEN


def analyze(text: str, config: Config = CONFIG):
    """The project run on ``text`` as gen.py: (findings, error or None)."""
    run = lint_project([GEN], config, use_cache=False, overrides={GEN: text})
    assert len(run.errors) <= 1, run.errors
    return run.findings, (run.errors[0] if run.errors else None)


def fix(text: str, options: FixOptions):
    """``fix_text`` on the project run's findings for ``text``: (new text or None, remaining, error)."""
    findings, error = analyze(text, options.config)
    if error is not None:
        return None, [], error.message
    return fix_text(source_of(text), dataclasses.replace(options, findings={GEN: findings}))


class _Collect(pyflakes.reporter.Reporter):
    def __init__(self) -> None:
        self.messages: list[str] = []

    def flake(self, message) -> None:  # noqa: D401 - pyflakes' API
        if isinstance(message, pyflakes.messages.UndefinedName):
            self.messages.append(message.message_args[0])

    def syntaxError(self, *args) -> None:  # pragma: no cover - parse is checked separately
        self.messages.append("<syntax error>")

    def unexpectedError(self, *args) -> None:  # pragma: no cover
        self.messages.append("<unexpected>")


def undefined_names(text: str) -> set[str]:
    reporter = _Collect()
    pyflakes.api.check(text, "gen.py", reporter)
    return set(reporter.messages)


def run_cli(module: str, *args: str, cwd: Optional[Path] = None, env_extra: Optional[dict] = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GRADMODE_CACHE_DIR", None)
    if env_extra:
        env.update(env_extra)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, errors="surrogateescape", timeout=timeout)  # a diff holds the files' own bytes


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Bytes and mode of every regular file below ``root`` (links not followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if d != ".gradmode_cache"]  # the tool's own cache (it has a .gitignore)
        for name in filenames:
            path = Path(dirpath, name)
            if path.is_symlink() or not path.is_file():
                continue
            out[str(path.relative_to(root))] = (path.read_bytes(), stat.S_IMODE(path.lstat().st_mode))
    return out


def assert_no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout


# --------------------------------------------------------------------------------------------------
# a strategy for programs of the shapes the rules are about
# --------------------------------------------------------------------------------------------------
# (import line, inference_mode spellings, no_grad spellings) it makes available
IMPORTS = {
    "torch": ("import torch", ["torch.inference_mode", "torch.autograd.inference_mode",
                               "torch.autograd.grad_mode.inference_mode"], ["torch.no_grad"]),
    "th": ("import torch as th", ["th.inference_mode"], ["th.no_grad"]),
    "from": ("from torch import inference_mode, no_grad", ["inference_mode"], ["no_grad"]),
    "as": ("from torch import inference_mode as im", ["im"], []),
    "gm": ("from torch.autograd import grad_mode", ["grad_mode.inference_mode"], ["grad_mode.no_grad"]),
    "gm_as": ("from torch.autograd.grad_mode import inference_mode as IM, no_grad as NG", ["IM"], ["NG"]),
}
WARM_FUNCS = ["capture", "warmup", "kernel_warmup", "_dummy_run", "autotune", "capture_graphs", "profile_run",
              "warm_up_model"]
COLD_FUNCS = ["forward", "generate", "helper", "run", "main", "step"]
CLASSES = ["CudaGraphRunner", "Model", "Engine", "PiecewiseGraphRunner", "Worker"]
ARGS = ["()", "()", "()", "(True)", "(mode=True)", "(False)", "(flag)", "(mode=False)"]


class _Gen:
    """Draws one program; lines are (depth, text). Comments in bodies carry unique ``# keepN`` markers."""

    def __init__(self, draw) -> None:
        self.draw = draw
        self.counter = 0
        keys = draw(st.lists(st.sampled_from(sorted(IMPORTS)), min_size=1, max_size=4, unique=True))
        if "torch" not in keys and draw(st.booleans()):
            keys.append("torch")
        self.imports = [IMPORTS[k][0] for k in keys]
        self.im_refs = [r for k in keys for r in IMPORTS[k][1]]
        self.ng_refs = [r for k in keys for r in IMPORTS[k][2]] or ["contextlib.nullcontext"]
        self.has_torch = "torch" in keys
        self.buffers = 0
        self.in_func = True

    def pick(self, seq):
        return self.draw(st.sampled_from(seq))

    def keep(self) -> str:
        self.counter += 1
        return f"# keep{self.counter}"

    def ctx(self) -> str:
        """A context-manager expression: mostly inference_mode, sometimes no_grad or something else."""
        kind = self.draw(st.integers(0, 9))
        if kind <= 6:
            return self.pick(self.im_refs) + self.pick(ARGS)
        if kind <= 8:
            return self.pick(self.ng_refs) + "()"
        return self.pick(["contextlib.nullcontext()", "open('log')", "lock"])

    def call_warm(self, is_async: bool) -> str:
        name = self.pick(WARM_FUNCS)
        recv = self.pick(["self.", "runner.", "", "self.runner."])
        call = f"{recv}{name}()"
        return f"await {call}" if is_async and self.draw(st.booleans()) else call

    def simple(self, is_async: bool) -> str:
        choice = self.draw(st.integers(0, 9))
        if choice == 0:
            return self.pick(["pass", "ctx = ctx or run_ctx", "run_ctx = ctx; ctx = run_ctx",
                              f"ctx = ctx if flag else {self.ctx()}"])
        if choice == 1:
            return "x = model(x)"
        if choice in (2, 3, 4):
            return self.call_warm(is_async)
        if choice == 5:
            return f"ctx = run_ctx or {self.ctx()}"
        if choice == 6:
            return f"self.capture_one(run_ctx={self.ctx()})"
        if choice == 7:
            return f"return {self.ctx()}" if self.in_func else f"ctx = {self.ctx()}"
        if choice == 8:
            return self.pick(COLD_FUNCS) + "(x)"
        return "self.run_once()"

    def with_header(self, is_async: bool) -> str:
        ctx = self.ctx()
        shape = self.draw(st.integers(0, 7))
        if shape == 1:
            head = f"{ctx} as ctx"
        elif shape == 2:
            head = f"{ctx}, open('log') as fh"
        elif shape == 3:
            head = f"open('log') as fh, {ctx}"
        elif shape == 4:
            head = f"({ctx}, contextlib.nullcontext())"
        elif shape == 5:
            head = f"{ctx}, {self.ctx()}"
        elif shape == 6:
            head = f"(\n        {ctx},\n        open('log') as fh,\n    )"
        else:
            head = ctx
        kw = "async with" if is_async and self.draw(st.integers(0, 3)) == 0 else "with"
        return f"{kw} {head}:"

    def block(self, depth: int, is_async: bool, budget: int) -> list[tuple[int, str]]:
        n = self.draw(st.integers(1, 3))
        lines: list[tuple[int, str]] = []
        for _ in range(n):
            lines.extend(self.statement(depth, is_async, budget))
        return lines

    def statement(self, depth: int, is_async: bool, budget: int) -> list[tuple[int, str]]:
        choice = self.draw(st.integers(0, 12 if budget > 0 else 3))
        comment = [(depth, self.keep())] if self.draw(st.integers(0, 4)) == 0 else []
        if choice <= 2:
            return comment + [(depth, self.simple(is_async))]
        if choice == 3:  # one-line with: `with ctx: stmt`
            return comment + [(depth, f"with {self.ctx()}: {self.simple(is_async)}")]
        if choice in (4, 5, 6):
            head = self.with_header(is_async)
            trailing = self.pick(["", "", f"  {self.keep()}", "  # noqa: GM101", "  # noqa"])
            return comment + [(depth, head + trailing)] + self.block(depth + 1, is_async, budget - 1)
        if choice == 7:  # ExitStack.enter_context
            return comment + [(depth, "with contextlib.ExitStack() as stack:"),
                              (depth + 1, f"stack.enter_context({self.ctx()})")] + self.block(
                depth + 1, is_async, budget - 1)
        if choice == 8:  # nested def, maybe decorated, then maybe called
            inner_async = self.draw(st.integers(0, 3)) == 0
            name = self.pick(WARM_FUNCS + COLD_FUNCS + ["run_once"])
            out = comment + self.decorators(depth)
            out.append((depth, f"{'async ' if inner_async else ''}def {name}():"))
            out += self.block(depth + 1, inner_async, budget - 1)
            if self.draw(st.booleans()):
                out.append((depth, f"{'await ' if inner_async and is_async else ''}{name}()"))
            return out
        if choice == 9:  # lazy buffer
            return comment + self.lazy_buffer(depth)
        if choice == 10:
            return comment + [(depth, "if flag:")] + self.block(depth + 1, is_async, budget - 1) + [
                (depth, "else:")] + self.block(depth + 1, is_async, budget - 1)
        if choice == 11:
            return comment + [(depth, "try:")] + self.block(depth + 1, is_async, budget - 1) + [
                (depth, "finally:"), (depth + 1, "pass")]
        return comment + [(depth, "for i in range(3):")] + self.block(depth + 1, is_async, budget - 1)

    def lazy_buffer(self, depth: int) -> list[tuple[int, str]]:
        self.buffers += 1
        name = f"self._buf{self.buffers}"
        factory = self.pick(["torch.empty(n)", "torch.zeros(n, dtype=torch.int32)", "x.new_empty(n)",
                             "torch.empty_like(x)", "torch.full((n,), -1)"])
        if not self.has_torch and factory.startswith("torch"):
            factory = "x.new_zeros(n)"
        guard = self.pick([f"{name} is None", f"{name} is None or {name}.shape[0] < n",
                           f"not hasattr(self, '_buf{self.buffers}')"])
        mutate = self.pick([f"{name}.fill_(0)", f"{name}[:n].copy_(x)", f"{name}.zero_()",
                            f"torch.add(x, 1, out={name}[:n])" if self.has_torch else f"{name}.add_(1)"])
        return [(depth, f"if {guard}:"), (depth + 1, f"{name} = {factory}"), (depth, mutate)]

    def decorators(self, depth: int) -> list[tuple[int, str]]:
        out = []
        for _ in range(self.draw(st.integers(0, 2))):
            kind = self.draw(st.integers(0, 4))
            if kind <= 1:
                out.append((depth, "@" + self.pick(self.im_refs) + self.pick(["", "()", "()", "(True)", "(False)"])))
            elif kind == 2:
                out.append((depth, "@" + self.pick(self.ng_refs) + "()"))
            elif kind == 3:
                out.append((depth, "@functools.lru_cache(maxsize=None)"))
            else:
                out.append((depth, "@staticmethod"))
        return out

    def function(self, depth: int) -> list[tuple[int, str]]:
        is_async = self.draw(st.integers(0, 4)) == 0
        name = self.pick(WARM_FUNCS + COLD_FUNCS)
        lines = self.decorators(depth)
        lines.append((depth, f"{'async ' if is_async else ''}def {name}(self, x=None, n=1, flag=True, "
                             f"run_ctx=None, runner=None, model=None, lock=None):"))
        return lines + self.block(depth + 1, is_async, budget=3)

    def program(self) -> list[tuple[int, str]]:
        lines = [(0, "import contextlib"), (0, "import functools")] + [(0, imp) for imp in self.imports]
        for _ in range(self.draw(st.integers(1, 3))):
            kind = self.draw(st.integers(0, 5))
            if kind <= 2:
                lines += self.function(0)
            elif kind <= 4:
                lines.append((0, f"class {self.pick(CLASSES)}:"))
                for _ in range(self.draw(st.integers(1, 3))):
                    lines += self.function(1)
            else:  # module-level statements
                lines += [(0, "runner = model = x = run_ctx = lock = self = None"), (0, "flag, n = True, 1")]
                head = self.with_header(False)
                self.in_func = False
                lines += [(0, head)] + self.block(1, False, budget=1)
                self.in_func = True
        return lines


@st.composite
def grad_mode_programs(draw) -> str:
    gen = _Gen(draw)
    lines = gen.program()
    indent = draw(st.sampled_from(["    ", "  ", "\t"]))
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    out = []
    for depth, text in lines:
        text = text.replace("\n    ", "\n" + indent * (depth + 1)).replace("\n)", "\n" + indent * depth + ")")
        out.append(indent * depth + text)
        if draw(st.integers(0, 9)) == 0:
            out.append("")  # blank lines anywhere
    return ("\n".join(out) + "\n").replace("\n", newline)


# --------------------------------------------------------------------------------------------------
# generated programs
# --------------------------------------------------------------------------------------------------
def _hypothesmith_programs():
    import hypothesmith

    return hypothesmith.from_grammar()


@pytest.mark.slow
@fuzz_settings
@given(source=_hypothesmith_programs())
def test_hypothesmith_programs_never_crash_the_linter_or_the_codemod(source: str) -> None:
    findings, error = analyze(source, CONFIG)  # must not raise
    if error is not None:
        assert error.message and "\n" not in error.message and not findings
    for options in (FixOptions(CONFIG), FixOptions(CONFIG, style="no_grad", unsafe_fixes=True)):
        fixed, remaining, error = fix(source, options)
        if error is not None:
            assert fixed is None and "\n" not in error
            continue
        if fixed is not None:
            assert_parses(fixed)
            again, _, error2 = fix(fixed, options)
            assert error2 is None and again is None, "fix is not idempotent"


@pytest.mark.slow
@mixed_settings
@given(source=_hypothesmith_programs(), snippet=grad_mode_programs(), style=st.sampled_from(["remove", "no_grad"]),
       unsafe=st.booleans())
def test_hypothesmith_programs_with_grad_mode_code_appended(source: str, snippet: str, style: str,
                                                            unsafe: bool) -> None:
    """Random code around the shapes the rules look at: still no crash, fixes parse and are idempotent."""
    newline = "\r\n" if "\r\n" in snippet else "\n"
    source = source.rstrip("\\ \t\r\n").replace("\r\n", "\n").replace("\n", newline) + newline
    try:
        compile(source + snippet, "gen.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        assume(False)
    _check_program(source + snippet, style, unsafe)


def _check_fix(source: str, options: FixOptions, before: list) -> None:
    """Fix ``source`` once and check the result; ``before`` is the findings of the source."""
    fixed, remaining, error = fix(source, options)
    assert error is None, error
    if fixed is None:
        # Nothing applicable: every finding left must be one the options do not fix.
        applicable = {"safe"} | ({"unsafe"} if options.unsafe_fixes else set())
        assert not [f for f in remaining if f.fixable in applicable], remaining
        return
    assert fixed != source
    assert_parses(fixed)
    # A fresh lint of the fixed text: nothing the options could still fix (its positions moved, so the
    # project lint, not ``remaining``, is what is left).
    remaining, relint_error = analyze(fixed, options.config)
    assert relint_error is None, relint_error
    if options.unsafe_fixes:
        assert not [f for f in remaining if f.code in FIX_RULES], (remaining, fixed)
        assert not [f for f in remaining if f.fixable], (remaining, fixed)
    else:
        assert not [f for f in remaining if f.code in FIX_RULES and f.fixable == "safe"], (remaining, fixed)
        assert not [f for f in remaining if f.fixable == "safe"], (remaining, fixed)
    # Idempotent: fixing the fixed text changes nothing.
    again, remaining2, error2 = fix(fixed, options)
    assert error2 is None and again is None, f"not idempotent:\n{fixed}\n---\n{again}"
    assert remaining2 == remaining
    # Line endings and comments kept; no name the fix uses is left undefined.
    if "\r\n" in source and source.count("\n") == source.count("\r\n"):
        assert fixed.count("\n") == fixed.count("\r\n"), "the fix mixed LF into a CRLF file"
    for marker in [w for w in source.split() if w.startswith("keep")]:
        assert marker in fixed, f"comment {marker} lost by the fix:\n{source}\n---\n{fixed}"
    assert undefined_names(fixed) <= undefined_names(source), (undefined_names(fixed) - undefined_names(source),
                                                               fixed)


def _check_program(source: str, style: str, unsafe: bool) -> None:
    results = {}
    for config in (CONFIG, CONFIG_IM):
        findings, error = analyze(source, config)
        assert error is None, f"{error}\n{source}"
        results[config] = sorted((f.code, f.line, f.col) for f in findings)
    assert not [c for c, _, _ in results[CONFIG_IM] if c in FIX_RULES], "GM1xx fixes under inference serving"
    _check_fix(source, FixOptions(CONFIG, style=style, unsafe_fixes=unsafe), results[CONFIG])


@pytest.mark.slow
@snippet_settings
@given(source=grad_mode_programs(), style=st.sampled_from(["remove", "no_grad"]), unsafe=st.booleans())
def test_grad_mode_programs_lint_and_fix_cleanly(source: str, style: str, unsafe: bool) -> None:
    _check_program(source, style, unsafe)


def test_self_referential_assignments_do_not_abort_the_analysis() -> None:
    """`x = x or default` is everyday Python; it must not end in 'nesting too deep' (exit 2).

    Found on torch/_dynamo/variables/builtin.py and torch/testing/_internal/common_utils.py.
    """
    source = (
        "import torch\n"
        "def f(x):  # no_grad\n"
        "    x = x or 1\n"
        "    return x\n"
        "def g(a, b):\n"
        "    a = b\n"
        "    b = a\n"
        "    with torch.inference_mode():\n"
        "        return a\n"
    )
    findings, error = analyze(source, CONFIG)
    assert error is None, error
    fixed, remaining, error = fix(source, FixOptions(CONFIG, unsafe_fixes=True))
    assert error is None, error


# --------------------------------------------------------------------------------------------------
# a real tree: torch's own sources
# --------------------------------------------------------------------------------------------------
# A warm path with a fixable finding, appended to some real files so the round trip has work to do.
PLANTED = (
    "\n\nclass _PlantedCudaGraphRunner:\n"
    "    def capture(self):\n"
    "        with torch.inference_mode():  # planted by test_robustness\n"
    "            self.run_once()\n"
    "    @torch.inference_mode()\n"
    "    def kernel_warmup(self):\n"
    "        self.run_once()\n"
)


def _torch_subset() -> list[Path]:
    """A bounded, deterministic subset of torch's sources (all of them with GRADMODE_ROUNDTRIP_ALL=1)."""
    import torch

    root = Path(torch.__file__).resolve().parent
    files = sorted(p for p in root.rglob("*.py") if p.is_file() and not p.is_symlink())
    if os.environ.get("GRADMODE_ROUNDTRIP_ALL"):
        return files
    picked = []
    for i, path in enumerate(files):
        size = path.stat().st_size
        text = path.read_bytes()
        if (b"inference_mode" in text and size <= 40_000) or (i % 60 == 0 and size <= 30_000):
            picked.append(path)
    return picked


@pytest.fixture(scope="module")
def torch_tree(tmp_path_factory) -> Path:
    """A copy of the subset, keeping torch's layout; a few files get a planted finding."""
    import torch

    root = Path(torch.__file__).resolve().parent
    dest = tmp_path_factory.mktemp("torchtree") / "torch"
    planted = 0
    for path in _torch_subset():
        target = dest / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        data = path.read_bytes()
        if planted < 6 and b"import torch\n" in data and b"inference_mode" in data:
            target.write_bytes(data + PLANTED.encode())
            planted += 1
    assert planted >= 3
    return dest


def _lint_json(tree: Path, *args: str, cwd: Path) -> dict:
    proc = run_cli("lints", str(tree), "--format", "json", *args, cwd=cwd)
    assert_no_traceback(proc)
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)
    for item in data["findings"]:
        item["path"] = str(Path(item["path"]).resolve().relative_to(tree.resolve()))
    data["errors"] = [dict(e, path=str(Path(e["path"]).resolve().relative_to(tree.resolve()))) for e in data["errors"]]
    return data


@pytest.mark.slow
def test_codemod_round_trip_over_torch_sources(torch_tree: Path, tmp_path: Path) -> None:
    work = tmp_path / "torch"
    shutil.copytree(torch_tree, work, symlinks=True)
    before = snapshot(work)
    lint = _lint_json(work, "--no-cache", "--jobs", "2", cwd=tmp_path)
    assert lint["errors"] == [], lint["errors"]
    with_fixes = {f["path"] for f in lint["findings"] if f["fixable"]}
    with_findings = {f["path"] for f in lint["findings"]}
    assert with_fixes, "the planted findings were not reported"

    proc = run_cli("lints.codemod", str(work), "--unsafe-fixes", "--jobs", "2", cwd=tmp_path)
    assert_no_traceback(proc)
    assert proc.returncode in (0, 1), proc.stderr
    after = snapshot(work)
    assert set(after) == set(before), "the codemod created or removed files"
    changed = {path for path in before if after[path] != before[path]}
    assert changed <= with_findings, f"files without findings were changed: {sorted(changed - with_findings)}"
    assert changed == with_fixes, f"fixable files left unchanged: {sorted(with_fixes - changed)}"
    for path in changed:
        assert after[path][1] == before[path][1], f"{path}: mode changed"
        assert_parses(after[path][0].decode("utf-8"), f"{path} after the codemod")
    # A second pass has nothing left to do and writes nothing.
    proc = run_cli("lints.codemod", str(work), "--unsafe-fixes", "--check", "--jobs", "2", cwd=tmp_path)
    assert proc.returncode in (0, 1) and "0 would change" in proc.stderr, proc.stderr
    assert snapshot(work) == after
    relint = _lint_json(work, "--no-cache", cwd=tmp_path)
    assert not [f for f in relint["findings"] if f["code"] in FIX_RULES], relint["findings"]


@pytest.mark.parametrize("source", [
    # two inference_mode items on one `with`: the fix drops one, the other still wraps the warm call
    "import torch\n"
    "def main(runner):\n"
    "    with torch.inference_mode(), torch.inference_mode():\n"
    "        runner.kernel_warmup()\n",
    # nested inference_mode blocks: the outer one only becomes safe to remove once the inner one is gone
    "import torch\n"
    "def main(runner):\n"
    "    with torch.inference_mode():\n"
    "        with torch.inference_mode():\n"
    "            runner.warmup()\n",
], ids=["two-items", "nested"])
def test_one_codemod_pass_fixes_everything_it_can(source: str) -> None:
    """Found by the generated programs: a second codemod run must not change the file again."""
    options = FixOptions(CONFIG)
    fixed, remaining, error = fix(source, options)
    assert error is None and fixed is not None
    assert not [f for f in remaining if f.fixable == "safe"], remaining
    again, _, _ = fix(fixed, options)
    assert again is None, f"second pass still changes the file:\n{fixed}---\n{again}"


@pytest.mark.parametrize("style", ["remove", "no_grad"])
@pytest.mark.parametrize("source", [
    "import torch\n"
    "class CudaGraphRunner:\n"
    "    def capture(self):\n"
    "        with torch.inference_mode() as ctx:\n"
    "            self.run_once(ctx)\n",
    "import torch\n"
    "def main(runner):\n"
    "    with torch.inference_mode() as ctx:\n"
    "        runner.kernel_warmup()\n"
    "        print(ctx)\n",
], ids=["GM101", "GM104"])
def test_unsafe_fix_keeps_the_with_target_bound(source: str, style: str) -> None:
    """Found by the generated programs: unwrapping `with inference_mode() as ctx:` must not leave `ctx` unbound."""
    fixed, _, error = fix(source, FixOptions(CONFIG, style=style, unsafe_fixes=True))
    assert error is None
    if fixed is not None:
        assert_parses(fixed)
        assert "ctx" not in undefined_names(fixed), f"the fix left `ctx` undefined:\n{fixed}"


# --------------------------------------------------------------------------------------------------
# determinism: jobs, cache
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mixed_tree(torch_tree: Path, tmp_path_factory) -> Path:
    """Small real files plus every rule's examples (so there are findings of every kind)."""
    from lints.rules import ALL_RULES

    dest = tmp_path_factory.mktemp("mixed") / "tree"
    for path in sorted(torch_tree.rglob("*.py")):
        if path.stat().st_size <= 12_000:  # planted files too: fixing big files is slow (see bench/RESULTS.md)
            target = dest / "torch" / path.relative_to(torch_tree)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    for code, rule in ALL_RULES.items():
        for i, example in enumerate(rule.INVALID + rule.VALID):
            files = example if isinstance(example, dict) else {f"example_{i}.py": example}
            for rel, text in files.items():
                target = dest / "examples" / code.lower() / (f"package_{i}" if isinstance(example, dict) else "") / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text.replace("# expect:", "# was expect:"))
    # The same content at two paths: the cache must report each under its own path.
    (dest / "examples" / "dup_a.py").write_text(ALL_RULES["GM101"].INVALID[0])
    (dest / "examples" / "dup_b.py").write_text(ALL_RULES["GM101"].INVALID[0])
    return dest


@pytest.mark.slow
def test_lint_results_do_not_depend_on_jobs_or_cache(mixed_tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # one example serving under inference mode would set the whole tree's inferred mode: fix it
    MODE = ("--serving-grad-mode", "no_grad")
    runs = {
        "jobs1": _lint_json(mixed_tree, *MODE, "--no-cache", "--jobs", "1", cwd=tmp_path),
        "jobs2": _lint_json(mixed_tree, *MODE, "--no-cache", "--jobs", "2", cwd=tmp_path),
        "cold": _lint_json(mixed_tree, *MODE, "--cache-dir", str(cache), "--jobs", "2", cwd=tmp_path),
        "warm": _lint_json(mixed_tree, *MODE, "--cache-dir", str(cache), "--jobs", "1", cwd=tmp_path),
    }
    assert runs["jobs1"]["findings"], "no findings: the comparison would prove nothing"
    assert {f["path"] for f in runs["jobs1"]["findings"]} >= {"examples/dup_a.py", "examples/dup_b.py"}
    assert any(cache.iterdir()), "the cache was not written"
    for name, run in runs.items():
        assert run == runs["jobs1"], f"{name} differs from --jobs 1 --no-cache"
    # An edit is seen through a warm cache (keyed by content), and --no-cache still agrees.
    edited = mixed_tree / "examples" / "dup_b.py"
    original = edited.read_bytes()
    try:
        edited.write_text("import torch\n")
        warm = _lint_json(mixed_tree, *MODE, "--cache-dir", str(cache), cwd=tmp_path)
        assert "examples/dup_b.py" not in {f["path"] for f in warm["findings"]}
        assert warm == _lint_json(mixed_tree, *MODE, "--no-cache", cwd=tmp_path)
    finally:
        edited.write_bytes(original)


@pytest.mark.slow
def test_codemod_results_do_not_depend_on_jobs(mixed_tree: Path, tmp_path: Path) -> None:
    outputs = {}
    for jobs in ("1", "2"):
        work = tmp_path / f"jobs{jobs}"
        shutil.copytree(mixed_tree, work)
        proc = run_cli("lints.codemod", ".", "--unsafe-fixes", "--serving-grad-mode", "no_grad", "--jobs", jobs,
                       cwd=work)
        assert_no_traceback(proc)
        assert proc.returncode in (0, 1), proc.stderr
        outputs[jobs] = (snapshot(work), proc.stdout, proc.stderr)
    assert outputs["1"][0] != snapshot(mixed_tree), "nothing was fixed: the comparison would prove nothing"
    assert outputs["1"] == outputs["2"]


# --------------------------------------------------------------------------------------------------
# bad input through the CLI and the codemod
# --------------------------------------------------------------------------------------------------
FIXABLE = (
    "import torch\n"
    "class CudaGraphRunner:\n"
    "    def capture(self):\n"
    "        with torch.inference_mode():\n"
    "            self.run_once()\n"
)


def _big_file(size: int) -> bytes:
    lines = [FIXABLE]
    total, i = len(FIXABLE), 0
    while total < size:
        line = f"value_{i} = compute({i}, 'padding padding padding padding')\n"
        lines.append(line)
        total += len(line)
        i += 1
    return "".join(lines).encode()


@pytest.fixture()
def bad_tree(tmp_path: Path) -> Path:
    root = tmp_path / "bad"
    root.mkdir()
    files = {
        "empty.py": b"",
        "bom.py": b"\xef\xbb\xbf" + FIXABLE.encode(),
        "crlf.py": FIXABLE.replace("\n", "\r\n").encode(),
        "tabs.py": FIXABLE.replace("    ", "\t").encode(),
        "formfeed.py": ("\f" + FIXABLE.replace("class", "\f\nclass") + "\f\n").encode(),
        "nul.py": FIXABLE.encode() + b"\x00\n",
        "latin1_no_cookie.py": FIXABLE.encode() + "# caf\xe9\n".encode("latin-1"),
        "latin1_cookie.py": ("# -*- coding: latin-1 -*-\n" + FIXABLE + "# caf\xe9\n").encode("latin-1"),
        "syntax_error.py": b"import torch\ndef capture(:\n    with torch.inference_mode():\n        pass\n",
        "big.py": _big_file(5 * 1024 * 1024),
        "readonly.py": FIXABLE.encode(),
        "deep.py": b"# no_grad\nx = " + b"[" * 150 + b"]" * 150 + b"\n",
        "x.py/inner.py": FIXABLE.encode(),  # a folder named x.py
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "readonly.py").chmod(0o444)
    (root / "self_loop.py").symlink_to("self_loop.py")
    (root / "loop_a.py").symlink_to("loop_b.py")
    (root / "loop_b.py").symlink_to("loop_a.py")
    (root / "dangling.py").symlink_to("does_not_exist.py")
    (root / "sub").mkdir()
    (root / "sub" / "up").symlink_to("..", target_is_directory=True)  # a folder loop
    return root


def _stderr_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]


def _errors_by_file(proc: subprocess.CompletedProcess, root: Path) -> dict[str, str]:
    out = {}
    for line in _stderr_lines(proc):
        if ": error: " in line and not line.startswith("gradmode"):
            path, message = line.split(": error: ", 1)
            out[os.path.relpath(path, root)] = message
    return out


EXPECTED_ERRORS = {  # file -> words its one-line error must contain
    "nul.py": "NUL",
    "latin1_no_cookie.py": "decode",
    "syntax_error.py": "syntax error at line 2",
    "big.py": "limit",
    "self_loop.py": "symbolic links",
    "loop_a.py": "symbolic links",
    "loop_b.py": "symbolic links",
    "dangling.py": "No such file",
}
FIXED_BY_CODEMOD = {"bom.py", "crlf.py", "tabs.py", "formfeed.py", "latin1_cookie.py", "x.py/inner.py"}


def test_linter_on_bad_input(bad_tree: Path) -> None:
    before = snapshot(bad_tree)
    proc = run_cli("lints", str(bad_tree), "--no-cache", "--format", "json", "--jobs", "2", cwd=bad_tree.parent)
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert snapshot(bad_tree) == before
    errors = _errors_by_file(proc, bad_tree)
    for name, words in EXPECTED_ERRORS.items():
        assert name in errors, f"no error line for {name}:\n{proc.stderr}"
        assert words.lower() in errors[name].lower(), (name, errors[name])
    unexpected = set(errors) - set(EXPECTED_ERRORS) - {"deep.py"}
    assert not unexpected, {k: errors[k] for k in unexpected}
    # one line per file, plus the serving-mode line and the summary
    assert len(_stderr_lines(proc)) == len(errors) + 2, proc.stderr
    assert _stderr_lines(proc)[-2].startswith("gradmode-lint: serving grad mode: ")
    report = json.loads(proc.stdout)
    assert {os.path.relpath(e["path"], bad_tree) for e in report["errors"]} == set(errors)
    found = {(os.path.relpath(f["path"], bad_tree), f["line"], f["code"]) for f in report["findings"]}
    # The same finding at the same line whatever the encoding, line endings or indentation.
    for name in FIXED_BY_CODEMOD | {"readonly.py"}:
        line = 5 if name == "latin1_cookie.py" else (5 if name == "formfeed.py" else 4)
        assert (name, line, "GM101") in found, (name, sorted(found))
    assert not [f for f in found if f[0] == "empty.py"]


@pytest.mark.parametrize("name, status, words", [
    ("empty.py", 0, None),
    ("bom.py", 1, None),
    ("nul.py", 2, "NUL"),
    ("big.py", 2, "limit"),
    ("self_loop.py", 2, "symbolic links"),
    ("x.py", 1, None),  # a folder: linted as one
])
def test_linter_exit_status_per_file(bad_tree: Path, name: str, status: int, words: Optional[str]) -> None:
    proc = run_cli("lints", str(bad_tree / name), "--no-cache", "-q", cwd=bad_tree.parent)
    assert_no_traceback(proc)
    assert proc.returncode == status, (proc.stdout, proc.stderr)
    lines = _stderr_lines(proc)
    if words is None:
        assert lines == [], proc.stderr
    else:
        assert len(lines) == 1 and lines[0].startswith(str(bad_tree / name) + ": error: "), lines
        assert words.lower() in lines[0].lower()


@pytest.mark.slow
def test_codemod_on_bad_input(bad_tree: Path) -> None:
    before = snapshot(bad_tree)
    ro_mode = stat.S_IMODE((bad_tree / "readonly.py").stat().st_mode)
    proc = run_cli("lints.codemod", str(bad_tree), "--jobs", "2", cwd=bad_tree.parent)
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    after = snapshot(bad_tree)
    assert set(after) == set(before), "files created or removed"
    changed = {name for name in before if after[name] != before[name]}
    assert changed == FIXED_BY_CODEMOD, sorted(changed)
    errors = _errors_by_file(proc, bad_tree)
    assert set(errors) == set(EXPECTED_ERRORS) | {"readonly.py"} | ({"deep.py"} & set(errors)), errors
    assert "read-only" in errors["readonly.py"]
    assert after["readonly.py"] == before["readonly.py"]
    assert stat.S_IMODE((bad_tree / "readonly.py").stat().st_mode) == ro_mode
    for name in changed:
        data, mode = after[name]
        assert mode == before[name][1], f"{name}: mode changed"
        assert b"inference_mode" not in data, name
    assert after["bom.py"][0].startswith(b"\xef\xbb\xbf")
    assert after["bom.py"][0][3:].decode() == after["x.py/inner.py"][0].decode()
    crlf = after["crlf.py"][0]
    assert crlf.count(b"\n") == crlf.count(b"\r\n")
    assert after["tabs.py"][0] == b"import torch\nclass CudaGraphRunner:\n\tdef capture(self):\n\t\tself.run_once()\n"
    latin = after["latin1_cookie.py"][0]
    assert latin.endswith("# caf\xe9\n".encode("latin-1")), latin
    for name in changed:
        text = read_source(str(bad_tree / name))
        assert not isinstance(text, FileError), text
        assert_parses(text.text, name)
    # Nothing is left to do: a second run changes nothing.
    again = run_cli("lints.codemod", str(bad_tree), "--jobs", "2", cwd=bad_tree.parent)
    assert_no_traceback(again)
    assert snapshot(bad_tree) == after


@pytest.mark.slow
def test_codemod_check_and_diff_write_nothing(bad_tree: Path) -> None:
    before = snapshot(bad_tree)
    for flag in ("--check", "--diff"):
        proc = run_cli("lints.codemod", str(bad_tree), flag, "--jobs", "1", cwd=bad_tree.parent)
        assert_no_traceback(proc)
        assert proc.returncode == 2, proc.stderr  # the unreadable files are still errors
        assert snapshot(bad_tree) == before, flag
    proc = run_cli("lints.codemod", str(bad_tree / "readonly.py"), "--check", cwd=bad_tree.parent)
    assert proc.returncode == 1, proc.stderr  # would change; read-only only matters when writing
    proc = run_cli("lints.codemod", str(bad_tree / "readonly.py"), cwd=bad_tree.parent)
    assert proc.returncode == 2 and snapshot(bad_tree) == before, proc.stderr
    lines = _stderr_lines(proc)
    assert lines[0] == f"{bad_tree / 'readonly.py'}: error: read-only file: fixes available but not written", lines


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("GRADMODE_SLOW_TESTS"),
                    reason="~90 s on 2 cores (libcst metadata over 5 MB); set GRADMODE_SLOW_TESTS=1")
def test_big_file_is_linted_when_the_limit_allows_it(tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    big.write_bytes(_big_file(5 * 1024 * 1024))
    proc = run_cli("lints", str(big), "--no-cache", "-q", "--max-file-size", str(6 * 1024 * 1024), cwd=tmp_path,
                   timeout=300)
    assert_no_traceback(proc)
    assert proc.returncode == 1 and ":4:14: GM101" in proc.stdout, (proc.stdout, proc.stderr)
