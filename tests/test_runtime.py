"""The runtime check (lints/runtime.py) on CPU: inference tensors exist there too.

An engine written to a temp folder keeps a field workspace and a pooled one (a module-level dict) made during
a warmup under inference mode; watch() and the walk must name each with its allocation line and the
inference-mode entry, and the in-place update under no_grad must then raise torch's error (the report is
true); the same warmup under no_grad must report nothing. Then the walk's corners (cycles, a 1e6 list,
objects whose attribute access raises, tensor subclasses, dataclasses, buffers, lru_cache), watch()'s
(nesting, exceptions, entries through decorators and ExitStack, the dispatch pass), the environment switch
and the pytest plugin.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

from lints import runtime
from lints.runtime import INFERENCE_TENSOR_ERROR, kept_inference_tensors, watch

from .helpers import ROOT

pytest_plugins = ["pytester"]

RAISES_ON_UPDATE = re.escape(INFERENCE_TENSOR_ERROR)

ENGINE = '''\
import torch

_POOL = {}


def pooled_workspace(key, numel):
    if key not in _POOL:
        _POOL[key] = torch.zeros(numel)  # POOL_ALLOC
    return _POOL[key]


class Layer:
    def __init__(self):
        self._ws = None

    def forward(self, x):
        if self._ws is None or self._ws.shape[0] < x.shape[0]:
            self._ws = torch.empty(x.shape[0], 4)  # FIELD_ALLOC
        ws = self._ws[: x.shape[0]]
        ws.fill_(1.0)
        pool = pooled_workspace("gemm", 16)
        pool.add_(1.0)
        return x.sum() + ws.sum() + pool.sum()


class Runner:
    def __init__(self):
        self.layer = Layer()

    def warmup(self):
        with torch.inference_mode():  # ENTRY
            self.layer.forward(torch.ones(8))  # WARM_CALL

    def warmup_fixed(self):
        with torch.no_grad():
            self.layer.forward(torch.ones(8))

    def serve(self, x):
        with torch.no_grad():
            return self.layer.forward(x)
'''


def line_of(source: str, marker: str) -> int:
    (line,) = [n for n, text in enumerate(source.splitlines(), 1) if marker in text]
    return line


@pytest.fixture
def load(tmp_path):
    """Import source text as a fresh module (registered in sys.modules for the test's duration)."""
    names = []

    def _load(source: str, stem: str = "engine"):
        name = f"gradmode_runtime_{stem}_{len(names)}_{os.getpid()}"
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        names.append(name)
        spec.loader.exec_module(module)
        return module

    yield _load
    for name in names:
        sys.modules.pop(name, None)


def inference_tensor(*shape):
    with torch.inference_mode():
        return torch.zeros(*shape)


# ----------------------------------------------------------------------------- the bug, reported and proven


def test_field_and_pooled_workspaces_are_reported_with_their_lines_and_the_update_then_raises(load):
    engine = load(ENGINE)
    runner = engine.Runner()
    with watch() as recorder:
        runner.warmup()
    report = recorder.kept(named={"runner": runner}, modules=[engine])
    by_path = {record.path: record for record in report}
    field, pool = "runner.layer._ws", f"{engine.__name__}._POOL['gemm']"
    assert sorted(by_path) == sorted([field, pool]), report.format()
    assert report.complete and report.notes == []

    expected = {field: ("FIELD_ALLOC", "Layer.forward", (8, 4)), pool: ("POOL_ALLOC", "pooled_workspace", (16,))}
    for path, (marker, function, shape) in expected.items():
        record = by_path[path]
        assert record.allocation_site == runtime.Site(engine.__file__, line_of(ENGINE, marker), function)
        assert record.allocation.seen_by == "torch_function"
        warm_call = runtime.Site(engine.__file__, line_of(ENGINE, "# WARM_CALL"), "Runner.warmup")
        assert warm_call in record.allocation.callers
        assert record.inference_mode_entries == (
            runtime.InferenceModeEntry(runtime.Site(engine.__file__, line_of(ENGINE, "# ENTRY"), "Runner.warmup"),
                                       "entered"),)
        assert (record.shape, record.dtype, record.device) == (shape, "torch.float32", "cpu")
        text = report.format()
        assert f"{engine.__name__}.py:{line_of(ENGINE, marker)}:{function}" in text
        assert "inference mode on since " in text and f":{line_of(ENGINE, '# ENTRY')}:Runner.warmup (entered)" in text

    # The report is true: the first in-place update outside inference mode raises, for each kept tensor.
    with pytest.raises(RuntimeError, match=RAISES_ON_UPDATE):
        runner.serve(torch.ones(4))
    with torch.no_grad(), pytest.raises(RuntimeError, match=RAISES_ON_UPDATE):
        engine._POOL["gemm"].add_(1.0)
    with pytest.raises(runtime.KeptInferenceTensorsError) as failed:
        recorder.assert_none_kept(named={"runner": runner}, modules=[engine.__name__])
    assert isinstance(failed.value, AssertionError) and failed.value.report == report


def test_the_fixed_warmup_reports_nothing_and_serves(load):
    engine = load(ENGINE)
    runner = engine.Runner()
    with watch() as recorder:
        runner.warmup_fixed()
    assert recorder.recorded == 0
    report = recorder.assert_none_kept(named={"runner": runner}, modules=[engine])
    assert list(report) == [] and report.complete and report.objects_examined > 0
    assert report.format().startswith("gradmode runtime check: no kept inference tensors")
    assert float(runner.serve(torch.ones(4))) > 0  # no_grad serving updates the buffers in place


def test_a_tensor_made_outside_any_watch_is_reported_without_a_site():
    holder = {"ws": inference_tensor(3)}
    (record,) = kept_inference_tensors(named={"pool": holder})
    assert record.path == "pool['ws']" and record.allocation is None and record.inference_mode_entry is None
    assert "allocated where no watch() saw it" in record.describe()


# ----------------------------------------------------------------------------- how inference mode was entered


def test_entries_through_a_decorator_an_exit_stack_nesting_and_before_watch(load):
    source = '''\
import contextlib
import torch


@contextlib.contextmanager
def autotune():
    with torch.inference_mode():  # OUTER
        yield


class Owner:
    @torch.inference_mode()  # DECORATOR
    def decorated(self):
        self.by_decorator = torch.ones(2)

    def exit_stack(self):
        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.inference_mode())  # STACK
            self.by_stack = torch.ones(2)

    def nested(self):
        with autotune():
            with torch.inference_mode():  # INNER
                self.by_nesting = torch.ones(2)
            with torch.inference_mode(False):
                self.not_inference = torch.ones(2)
'''
    module = load(source, "entries")
    owner = module.Owner()
    with watch() as recorder:
        owner.decorated()
        owner.exit_stack()
        owner.nested()
    with torch.inference_mode():
        with watch() as before:
            owner.before_watch = torch.ones(2)
    site = functools.partial(runtime.Site, module.__file__)
    entries = {record.path: record.inference_mode_entries for record in recorder.kept(named={"owner": owner})}
    assert entries == {
        "owner.by_decorator": (runtime.InferenceModeEntry(site(line_of(source, "# DECORATOR"), "Owner.decorated"),
                                                          "decorator"),),
        "owner.by_stack": (runtime.InferenceModeEntry(site(line_of(source, "# STACK"), "Owner.exit_stack"),
                                                      "entered"),),
        "owner.by_nesting": (runtime.InferenceModeEntry(site(line_of(source, "# OUTER"), "autotune"), "entered"),
                             runtime.InferenceModeEntry(site(line_of(source, "# INNER"), "Owner.nested"), "entered")),
        "owner.before_watch": (),  # made under the second watch only
    }
    assert not owner.not_inference.is_inference()
    (late,) = [r for r in before.kept(named={"owner": owner}) if r.path == "owner.before_watch"]
    this_file = os.path.abspath(__file__)
    assert late.inference_mode_entry.how == "before watch()"
    assert late.inference_mode_entry.site.filename == this_file
    assert runtime._INFERENCE_MODE.__enter__ is runtime._HOOKS["enter"][0]  # the hooks are gone


def test_the_dispatch_pass_sees_what_torchscript_allocates(load):
    """TorchScript runs ATen ops from C++, as C++ extensions do: only the TorchDispatchMode sees them."""
    source = '''\
import torch


@torch.jit.script
def scripted_workspace(numel: int) -> torch.Tensor:
    return torch.zeros(numel)


class Owner:
    def warmup(self):
        with torch.inference_mode():
            self.ws = scripted_workspace(4)  # SCRIPTED
'''
    with warnings.catch_warnings():  # torch 2.13 deprecates TorchScript; C++ extensions take the same path
        warnings.simplefilter("ignore", DeprecationWarning)
        module = load(source, "scripted")
    seen = {}
    for dispatch in (True, False):
        owner = module.Owner()
        with watch(dispatch=dispatch) as recorder:
            owner.warmup()
        (record,) = recorder.kept(named={"owner": owner})
        seen[dispatch] = record.allocation
    assert seen[True].site == runtime.Site(module.__file__, line_of(source, "# SCRIPTED"), "Owner.warmup")
    assert seen[True].seen_by == "torch_dispatch" and seen[True].op == "aten.zeros.default"
    assert seen[False] is None  # the Python API never saw torch.zeros inside the TorchScript function


# ----------------------------------------------------------------------------- watch() itself


def _mode_stacks() -> tuple:
    return torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()


def test_nested_watches_each_record_and_leave_no_mode_behind():
    before = _mode_stacks()
    with watch() as outer:
        with torch.inference_mode():
            first = torch.ones(2)
        with watch() as inner:
            with torch.inference_mode():
                second = torch.ones(2)
        with torch.inference_mode():
            third = torch.ones(2)
        assert _mode_stacks() == (before[0] + 1, before[1] + 1)
    assert _mode_stacks() == before
    assert [outer.allocation_of(t) is not None for t in (first, second, third)] == [True, True, True]
    assert [inner.allocation_of(t) is not None for t in (first, second, third)] == [False, True, False]
    assert inner.allocation_of(second).site.lineno == outer.allocation_of(second).site.lineno
    with torch.inference_mode():
        after = torch.ones(2)
    assert outer.allocation_of(after) is None
    active = watch()
    with active:
        with pytest.raises(RuntimeError, match="already active"):
            active.__enter__()


def test_an_exception_in_the_block_propagates_and_everything_is_undone():
    before = _mode_stacks()
    with pytest.raises(ValueError, match="boom"):
        with watch():
            with torch.inference_mode():
                torch.ones(1)
                raise ValueError("boom")
    assert _mode_stacks() == before
    assert runtime._INFERENCE_MODE.__enter__ is runtime._HOOKS["enter"][0]
    assert runtime._entry_stack() == [] and not torch.is_inference_mode_enabled()


def test_in_place_results_and_out_arguments_are_not_new_allocations():
    base = inference_tensor(4)
    with watch() as recorder:
        with torch.inference_mode():
            same = base.add_(1)
            out = torch.add(base, 1, out=base)
            view = base[:2]
            values, indices = torch.topk(base, 2)
    assert same is base and out is base and recorder.allocation_of(base) is None
    assert recorder.allocation_of(view).op == "__getitem__"
    assert recorder.allocation_of(values).op == recorder.allocation_of(indices).op == "topk"


# ----------------------------------------------------------------------------- the walk


def test_cycles_are_walked_once():
    class Node:
        pass

    a, b = Node(), Node()
    a.peer, b.peer = b, a
    a.ws = inference_tensor(2)
    loop: list = [a]
    loop.append(loop)
    table: dict = {"self": None, "ws": a.ws}
    table["self"] = table
    report = kept_inference_tensors(named={"loop": loop, "table": table, "b": b})
    (record,) = report  # breadth first: found at depth 1 in the table, then at depth 2 through the list
    assert (record.path, record.other_paths) == ("table['ws']", ("loop[0].ws",))
    assert report.complete and report.objects_examined < 20


def test_a_list_of_a_million_ints_or_tensors_returns_fast_with_a_note():
    ints = list(range(1_000_000))
    start = time.perf_counter()
    report = kept_inference_tensors(named={"ints": ints})
    assert time.perf_counter() - start < 2.0
    assert list(report) == [] and not report.complete
    assert report.notes == ["ints: looked at the first 100000 of 1000000 items (max_items)"]

    one = inference_tensor(1)
    tensors = [torch.zeros(1)] * 1_000_000 + [one]  # the inference one is past the bound
    start = time.perf_counter()
    report = kept_inference_tensors(named={"tensors": tensors})
    assert time.perf_counter() - start < 2.0
    assert report.notes == ["tensors: looked at the first 100000 of 1000001 items (max_items)"]
    assert list(report) == [] and not report.complete
    with pytest.warns(RuntimeWarning, match="the walk was incomplete"):
        runtime.assert_no_kept_inference_tensors(named={"tensors": tensors})
    (found,) = kept_inference_tensors(named={"tensors": tensors[-150_001:]}, max_items=200_000)
    assert found.path == "tensors[150000]"  # what cut the walk short was the bound

    nested = [list(range(1000)) for _ in range(1000)]
    report = kept_inference_tensors(named={"nested": nested}, max_objects=10_000)
    assert report.objects_examined == 10_000 and not report.complete
    assert report.notes == ["stopped after examining 10000 objects (max_objects): the walk is incomplete; raise "
                            "max_objects or give narrower roots"]

    deep: list = [inference_tensor(1)]
    for _ in range(10):
        deep = [deep]
    assert list(kept_inference_tensors(deep, max_depth=5)) == []
    assert kept_inference_tensors(deep, max_depth=5).notes[0].endswith("not opened (max_depth=5)")
    assert [r.path for r in kept_inference_tensors(deep)] == ["list" + "[0]" * 11]


def test_objects_whose_attribute_access_raises_are_read_without_running_any_of_it():
    calls: list = []

    class Hostile:
        def __getattr__(self, name):
            calls.append(("__getattr__", name))
            raise RuntimeError("no attributes here")

        @property
        def broken(self):
            calls.append(("property", "broken"))
            raise RuntimeError("a property that raises")

        @property
        def __class__(self):
            calls.append(("property", "__class__"))
            raise RuntimeError("__class__ lies")

    class Guarded:
        __slots__ = ("ws", "__private", "empty")

        def __getattribute__(self, name):
            calls.append(("__getattribute__", name))
            raise RuntimeError("no attribute access at all")

    hostile = Hostile()
    hostile.__dict__["ws"] = inference_tensor(2)
    guarded = Guarded()
    Guarded.ws.__set__(guarded, inference_tensor(3))
    Guarded._Guarded__private.__set__(guarded, {"inner": inference_tensor(4)})
    paths = sorted(r.path for r in kept_inference_tensors(named={"hostile": hostile, "guarded": guarded}))
    assert paths == ["guarded.__private['inner']", "guarded.ws", "hostile.ws"]
    assert calls == []


def test_tensor_subclasses_are_found_without_running_their_torch_function():
    calls: list = []

    class Tagged(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(getattr(func, "__name__", str(func)))
            return super().__torch_function__(func, types, args, kwargs or {})

    with watch() as recorder:
        with torch.inference_mode():
            tagged = torch.zeros(3).as_subclass(Tagged)  # TAGGED: as_subclass passes no mode: known by storage
            doubled = tagged * 2  # a Tagged result, through Tagged.__torch_function__
        plain = torch.zeros(2).as_subclass(Tagged)
    assert type(doubled) is Tagged and recorder.allocation_of(doubled).op == "mul"
    calls.clear()
    holder = {"tagged": tagged, "plain": plain, "param": torch.nn.Parameter(torch.zeros(1)), "doubled": [doubled]}
    report = recorder.kept(named={"holder": holder})
    assert calls == []
    assert [(r.path, r.type_name, r.shape, r.via_storage) for r in report] == [
        ("holder['tagged']", "Tagged", (3,), True), ("holder['doubled'][0]", "Tagged", (3,), False)]
    this_test = "test_tensor_subclasses_are_found_without_running_their_torch_function"
    tagged_line = line_of(Path(__file__).read_text(), "# TAG" + "GED:")
    assert report[0].allocation_site == runtime.Site(os.path.abspath(__file__), tagged_line, this_test)
    assert "shares its storage with a tensor made at" in report[0].describe()


def test_dataclass_fields_buffers_and_submodules_by_name():
    @dataclasses.dataclass
    class State:
        ws: torch.Tensor
        sizes: tuple = ()

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        cache: dict

    @dataclasses.dataclass
    class Slotted:
        __slots__ = ("ws",)
        ws: torch.Tensor

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(2, 2)
            self.register_buffer("kv", None)

        def forward(self, x):
            if self.kv is None:
                self.kv = torch.zeros(4, 2)  # KV_ALLOC: a registered buffer, set lazily
            self.kv[: x.shape[0]].copy_(x)
            return self.proj(x)

    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList([Attention() for _ in range(3)])
    model.heads = torch.nn.ModuleDict({"lm": Attention()})
    with watch() as recorder:
        with torch.inference_mode():
            model.layers[1](torch.ones(2, 2))
            model.heads["lm"](torch.ones(2, 2))
            state = State(torch.zeros(2), sizes=(1, 2))
            frozen = Frozen({"ws": torch.zeros(1)})
            slotted = Slotted(torch.zeros(5))
    report = recorder.kept(named={"model": model, "state": state, "frozen": frozen, "slotted": slotted})
    assert sorted(r.path for r in report) == [
        "frozen.cache['ws']", "model.heads['lm'].kv", "model.layers[1].kv", "slotted.ws", "state.ws"]
    (kv,) = [r for r in report if r.path == "model.layers[1].kv"]
    assert kv.allocation_site.lineno == line_of(Path(__file__).read_text(), "# KV" + "_ALLOC")
    assert not model.layers[1].proj.weight.is_inference()  # parameters made outside inference mode: not reported
    with torch.no_grad(), pytest.raises(RuntimeError, match=RAISES_ON_UPDATE):
        model.layers[1](torch.ones(2, 2))


def test_lru_cache_results_closures_and_class_level_pools(load):
    source = '''\
import functools
import torch


@functools.lru_cache(maxsize=8)
def bounded_workspace(numel):
    return torch.zeros(numel)  # BOUNDED


@functools.cache
def unbounded_workspace(numel, dtype=torch.float32):
    return {"ws": torch.zeros(numel, dtype=dtype)}


def make_getter():
    held = []

    def get(numel):
        if not held:
            held.append(torch.zeros(numel))
        return held[0]
    return get


get_cached = make_getter()


class Kernel:
    _workspaces = {}

    @classmethod
    def workspace(cls, numel):
        return cls._workspaces.setdefault(numel, torch.zeros(numel))
'''
    module = load(source, "caches")
    with watch() as recorder:
        with torch.inference_mode():
            module.bounded_workspace(3)
            module.bounded_workspace(5)
            module.unbounded_workspace(4)
            module.get_cached(2)
            module.Kernel.workspace(6)
    report = recorder.kept(modules=[module])
    name = module.__name__
    assert sorted(r.path for r in report) == sorted([
        f"{name}.bounded_workspace.cache[3]", f"{name}.bounded_workspace.cache[5]",
        f"{name}.unbounded_workspace.cache[4]['ws']", f"{name}.get_cached.<closure held>[0]",
        f"{name}.Kernel._workspaces[6]"]), report.format()
    (three,) = [r for r in report if r.path.endswith("cache[3]")]
    assert three.allocation_site == runtime.Site(module.__file__, line_of(source, "# BOUNDED"), "bounded_workspace")
    with torch.no_grad(), pytest.raises(RuntimeError, match=RAISES_ON_UPDATE):
        module.bounded_workspace(3).zero_()


def test_modules_given_by_name_and_what_is_not_a_module():
    report = kept_inference_tensors(modules=["gradmode_no_such_module", 42])
    assert list(report) == [] and not report.complete
    assert report.notes == ["module 'gradmode_no_such_module' is not imported: not walked",
                            "modules=: an int is not a module: not walked"]


# ----------------------------------------------------------------------------- the environment switch


def test_the_environment_variable_makes_watch_report_on_stderr(load, monkeypatch, capsys):
    engine = load(ENGINE)
    runner = engine.Runner()
    monkeypatch.delenv(runtime.ENV_VAR, raising=False)
    with watch(named={"runner": runner}):
        runner.warmup_fixed()
    assert capsys.readouterr().err == ""

    monkeypatch.setenv(runtime.ENV_VAR, "1")
    with watch(named={"runner": runner}):
        runner.warmup_fixed()
    assert capsys.readouterr().err.startswith("gradmode runtime check: no kept inference tensors")
    engine = load(ENGINE)  # a fresh pool: the one above was made outside inference mode
    runner = engine.Runner()
    with watch(named={"runner": runner}, modules=[engine]):
        runner.warmup()
    err = capsys.readouterr().err
    assert err.startswith("gradmode runtime check: 2 kept inference tensor(s)")
    assert "runner.layer._ws: torch.float32[8, 4] on cpu" in err
    assert f"{engine.__name__}.py:{line_of(ENGINE, 'FIELD_ALLOC')}:Layer.forward (empty, seen by torch_function)" in err
    assert f"{engine.__name__}.py:{line_of(ENGINE, '# ENTRY')}:Runner.warmup (entered)" in err

    with watch():  # no roots: the recorded tensors still alive
        runner.warmup()
        kept_alive = torch.inference_mode()(torch.zeros)(3)
    err = capsys.readouterr().err
    assert err.startswith("gradmode runtime check: 1 inference tensor(s) made under watch() still alive")
    assert "torch.float32[3] on cpu allocated at" in err and kept_alive.is_inference()

    monkeypatch.setenv(runtime.ENV_VAR, "raise")
    fresh = engine.Runner()
    with pytest.raises(runtime.KeptInferenceTensorsError, match="runner.layer._ws"):
        with watch(named={"runner": fresh}):
            fresh.warmup()
    assert "runner.layer._ws" in capsys.readouterr().err


def test_check_at_startup_is_free_unless_the_variable_is_set(monkeypatch, capsys):
    holder: dict = {}
    monkeypatch.delenv(runtime.ENV_VAR, raising=False)
    before = _mode_stacks()
    with runtime.check_at_startup(named={"holder": holder}) as recorder:
        assert recorder is None and _mode_stacks() == before
    monkeypatch.setenv(runtime.ENV_VAR, "1")
    with runtime.check_at_startup(named={"holder": holder}) as recorder:
        with torch.inference_mode():
            holder["ws"] = torch.zeros(2)
    assert recorder.allocation_of(holder["ws"]) is not None
    assert "holder['ws']: torch.float32[2] on cpu" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the pytest plugin

PLUGIN_TESTS = '''\
import torch


class Runner:
    def __init__(self):
        self.ws = None

    def warmup(self, ctx):
        with ctx():
            if self.ws is None:
                self.ws = torch.zeros(4)  # WS


def test_fixed(inference_tensor_watch):
    runner = Runner()
    with inference_tensor_watch.watch():
        runner.warmup(torch.no_grad)
    inference_tensor_watch.assert_none_kept(named={"runner": runner})


def test_buggy(inference_tensor_watch):
    runner = Runner()
    with inference_tensor_watch.watch():
        runner.warmup(torch.inference_mode)
    inference_tensor_watch.assert_none_kept(named={"runner": runner})
'''


def _plugin_installed() -> bool:
    from importlib import metadata

    return any(ep.value == "lints.pytest_plugin" for ep in metadata.entry_points(group="pytest11"))


def test_the_pytest_plugin_is_declared_as_a_pytest11_entry_point():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["project"]["entry-points"]["pytest11"] == {"gradmode": "lints.pytest_plugin"}


def test_the_fixture_through_pytester(pytester):
    pytester.makepyfile(test_engine=PLUGIN_TESTS)
    args = [] if _plugin_installed() else ["-p", "lints.pytest_plugin"]
    result = pytester.runpytest(*args, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    line = line_of(PLUGIN_TESTS, "# WS")
    result.stdout.fnmatch_lines([
        "*KeptInferenceTensorsError: gradmode runtime check: 1 kept inference tensor(s)*",
        "*runner.ws: torch.float32[[]4[]] on cpu",
        f"*allocated at *test_engine.py:{line}:Runner.warmup (zeros, seen by torch_function)",
        f"*inference mode on since *test_engine.py:{line_of(PLUGIN_TESTS, 'with ctx():')}:Runner.warmup (entered)",
    ])


@pytest.mark.e2e  # fresh interpreters, with torch made unimportable
def test_the_plugin_and_the_static_tool_load_without_torch(tmp_path):
    """pytest loads the plugin wherever gradmode-lint is installed, torch or not: it must not import it."""
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n\n\n"
                                            "def test_fixture(inference_tensor_watch):\n    pass\n")
    script = ("import sys\n"
              "sys.modules['torch'] = None  # importing torch now raises ImportError\n"
              "import lints, lints.cli, lints.pytest_plugin, pytest\n"
              "code = pytest.main(['-q', '-rs', '-p', 'no:cacheprovider', '-p', 'no:gradmode', "
              "'-p', 'lints.pytest_plugin', sys.argv[1]])\n"
              "print('torch imported:', sys.modules['torch'] is not None)\n"
              "sys.exit(code)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "test_plain.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 1 skipped" in proc.stdout and "needs torch" in proc.stdout, proc.stdout
    assert "torch imported: False" in proc.stdout
