"""The runtime check (lints/runtime.py) on this folder's runners and on the real upstream code.

Every test runs the warmup under ``runtime.watch()``, walks the runner (and, where they matter, the upstream
modules and FlashInfer's) with ``kept_inference_tensors``, checks each kept workspace's allocation line and
inference-mode entry, then proves the report true: the update that follows raises torch's error. Each prints
its report in a ``[runtime report: ...]`` block, to be pasted into results.md.

(a) Toy runners: ``runner_buggy`` (entries: ``autotune_context`` and ``warmup``), ``runner_reverse`` (the
    ``@torch.inference_mode()`` decorator on ``warmup``) reported before eager serving / graph capture
    raises; ``runner_fixed``: nothing, with warmup and graph capture both under watch().
(b) SGLang 0.5.15 / 0.5.15+codemod / 0.5.23 (``python gpu_validation/fetch_upstream.py``): ``BaseRunner.
    _dummy_run`` alone (CPU and CUDA; entry ``base_runner.py``), ``run_flashinfer_autotune_forward`` (entry
    ``flashinfer_autotune.py``) and the chain ``_flashinfer_autotune`` -> ``_dummy_run`` (both entries) with
    FlashInfer's real autotuner around ``mm_bf16`` (GPU): 0.5.15 reports the layer's workspaces, the other
    two nothing at all (FlashInfer's modules and autotuner walked too).
(c) FlashInfer's autotuner around ``mm_bf16`` in the buggy toy warmup: the layer's workspaces and FlashInfer's
    own process-wide ``mm_bf16_workspace`` (``flashinfer.utils._cache_buf``, made by its first call), or why
    not visible.
(d) Overhead: the toy warmup bare, under watch(dispatch=False) and under watch().

Toy runners and ``_dummy_run`` also run on CPU (CI); CUDA graphs and FlashInfer are marked ``gpu`` and skip
without CUDA; the upstream tests are ``slow`` (they fetch the pinned wheels when the files are absent).
"""
from __future__ import annotations

import ast
import contextlib
import functools
import statistics
import sys
import time
from pathlib import Path

import pytest
import torch

from gpu_validation import checks, runner_buggy, runner_fixed, runner_reverse
from gpu_validation import sglang_upstream as su
from gpu_validation.checks import INFERENCE_TENSOR_ERROR, requires_cuda
from lints import runtime

HERE = Path(__file__).resolve().parent
VARIANTS = ("0.5.15", "0.5.15+codemod", "0.5.23")
BUGGY_VARIANTS = {"0.5.15"}
FI_GRAPH_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
FI_LAYER = {"hidden_size": 128, "intermediate_size": 256, "num_experts": 8, "top_k": 2}
WORKSPACES = ("_ws", "_topk_idx_out")


# ----------------------------------------------------------------------------- helpers

def line_of(path: Path, text: str) -> int:
    """The one line of ``path`` that contains ``text``."""
    (line,) = [n for n, line in enumerate(Path(path).read_text().splitlines(), 1) if text in line]
    return line


def inference_mode_with_lines(path: Path) -> set:
    """The header lines of every ``with`` statement of ``path`` that enters ``torch.inference_mode()``
    (a multi-line header may be attributed to any of its lines, depending on the Python version)."""
    lines: set = set()
    for node in ast.walk(ast.parse(Path(path).read_text())):
        calls = [item.context_expr for item in getattr(node, "items", ()) if isinstance(item.context_expr, ast.Call)]
        if any(isinstance(call.func, ast.Attribute) and call.func.attr == "inference_mode" for call in calls):
            lines.update(range(node.lineno, max(item.context_expr.end_lineno for item in node.items) + 1))
    assert lines, f"{path}: no `with torch.inference_mode()` found"
    return lines


def workspace_sites(module) -> dict:
    """{attribute: Site} of the two lazily allocated workspaces of ``module``'s ToyMoELayer."""
    path = str(Path(module.__file__).resolve())
    return {name: runtime.Site(path, line_of(path, f"self.{name} = torch.empty("), "ToyMoELayer.forward")
            for name in WORKSPACES}


def check_workspaces(report, prefix: str, module, entries: list) -> None:
    """Both workspaces under ``prefix`` are reported, allocated in ``module`` under ``entries``:
    [(file, lines allowed, function, how)], outermost first."""
    by_path = {record.path: record for record in report}
    sites = workspace_sites(module)
    for name in WORKSPACES:
        record = by_path.get(f"{prefix}.{name}")
        assert record is not None, f"{prefix}.{name} not reported:\n{report.format()}"
        assert record.allocation_site == sites[name], record.describe()
        got = [(str(Path(e.site.filename).resolve()), e.site.lineno, e.site.function, e.how)
               for e in record.inference_mode_entries]
        assert len(got) == len(entries), record.describe()
        for (filename, lineno, function, how), (want_file, want_lines, want_function, want_how) in zip(got, entries):
            assert filename == str(Path(want_file).resolve()) and lineno in want_lines, record.describe()
            assert (function, how) == (want_function, want_how), record.describe()


def show(capsys, title: str, text: str) -> None:
    with capsys.disabled():
        print(f"\n[runtime report: {title}]\n{text}\n[end of report]")


def toy_buggy_entries() -> list:
    path = HERE / "runner_buggy.py"
    return [(path, {line_of(path, "        with torch.inference_mode():")}, "autotune_context", "entered"),
            (path, {line_of(path, "with run_ctx or torch.inference_mode():")}, "ModelRunner.warmup", "entered")]


# ----------------------------------------------------------------------------- (a) toy runners

@pytest.mark.parametrize("device", checks.devices())
def test_toy_buggy_runner_reported_before_the_crash(device, capsys):
    runner = checks.new_runner(runner_buggy, device)
    with runtime.watch() as recorder:
        runner.warmup()
    report = recorder.kept(named={"runner": runner}, modules=[runner_buggy])
    show(capsys, f"runner_buggy warmup on {device}", report.format())
    assert sorted(r.path for r in report) == [f"runner.layer.{name}" for name in sorted(WORKSPACES)]
    check_workspaces(report, "runner.layer", runner_buggy, toy_buggy_entries())
    (x,) = checks.make_inputs(runner.layer, (3,))
    with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
        runner.forward_eager(x)
    if device == "cuda":
        graphs = runner_buggy.CudaGraphRunner(runner, checks.GRAPH_BATCH_SIZES)
        with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
            graphs.capture()
        torch.cuda.synchronize()


@pytest.mark.parametrize("device", checks.devices())
def test_toy_reverse_runner_reported_before_the_capture_raises(device, capsys):
    """Warmup under ``@torch.inference_mode()``; the capture (CUDA), or the layer's forward with no grad-mode
    context, as the capture runs it (CPU), then updates the workspaces in place outside inference mode."""
    runner = runner_reverse.ModelRunner(runner_reverse.ToyMoELayer(device=device), max(checks.GRAPH_BATCH_SIZES))
    with runtime.watch() as recorder:
        runner.warmup()
    report = recorder.kept(named={"runner": runner}, modules=[runner_reverse])
    show(capsys, f"runner_reverse warmup on {device}", report.format())
    path = HERE / "runner_reverse.py"
    decorator = line_of(path, "    def warmup(self) -> None:") - 1
    check_workspaces(report, "runner.layer", runner_buggy, [(path, {decorator}, "ModelRunner.warmup", "decorator")])
    assert len(report) == 2
    if device == "cuda":
        graphs = runner_reverse.CudaGraphRunner(runner, checks.GRAPH_BATCH_SIZES)
        with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
            graphs.capture()
        torch.cuda.synchronize()
    else:
        (x,) = checks.make_inputs(runner.layer, (3,))
        with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
            runner.layer.forward(x)


@pytest.mark.parametrize("device", checks.devices())
def test_toy_fixed_runner_reports_nothing(device, capsys):
    runner = checks.new_runner(runner_fixed, device)
    graphs = runner_fixed.CudaGraphRunner(runner, checks.GRAPH_BATCH_SIZES) if device == "cuda" else None
    with runtime.watch() as recorder:  # around warmup and, on CUDA, graph capture
        runner.warmup()
        if graphs is not None:
            graphs.capture()
    report = recorder.assert_none_kept(named={"runner": runner, "graphs": graphs}, modules=[runner_fixed])
    show(capsys, f"runner_fixed warmup{' + capture' if graphs else ''} on {device}",
         f"{report.format()}\n{recorder.recorded} inference tensors made under watch()")
    assert recorder.recorded == 0
    checks.check_eager_serving(runner)
    if graphs is not None:  # the graphs captured under watch() replay correctly
        for x in checks.make_inputs(runner.layer, (16, 5, 1)):
            ref, _ = checks.reference_forward(runner.layer, x)
            torch.testing.assert_close(graphs.replay(x).float(), ref, **checks.tolerances(runner.layer.dtype))


# ----------------------------------------------------------------------------- FlashInfer helpers

@pytest.fixture(scope="module")
def flashinfer():
    return pytest.importorskip(
        "flashinfer", reason="flashinfer-python is not installed (pip install flashinfer-python==0.7.2.post1)")


def mm_bf16_gemm(flashinfer, backend: str = "cublaslt"):
    major, minor = torch.cuda.get_device_capability()
    if not flashinfer.mm_bf16.is_backend_supported(backend, major * 10 + minor):
        pytest.skip(f"flashinfer.mm_bf16 backend {backend!r} does not support sm{major}{minor}")

    def gemm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return flashinfer.mm_bf16(x, weight.t(), backend=backend)
    return gemm


def flashinfer_modules() -> list:
    """FlashInfer's modules whose globals hold process-wide state: its scratch buffers and the autotuner."""
    return [module for name, module in sorted(sys.modules.items())
            if module is not None and (name == "flashinfer.utils" or name.startswith("flashinfer.autotuner"))]


def _is_mm_bf16_workspace(key) -> bool:
    return isinstance(key, tuple) and key[:1] == ("mm_bf16_workspace",)


@contextlib.contextmanager
def fresh_mm_bf16_workspace():
    """Take FlashInfer's process-wide ``mm_bf16_workspace`` out of its cache, so the run under test makes it
    (its first ``mm_bf16`` call does), and put the previous one back afterwards. Yields the cache, or None
    where this FlashInfer keeps no such cache (then the workspace cannot be checked)."""
    cache = getattr(sys.modules.get("flashinfer.utils"), "_cache_buf", None)
    if not isinstance(cache, dict):
        yield None
        return
    saved = {key: cache.pop(key) for key in [key for key in cache if _is_mm_bf16_workspace(key)]}
    try:
        yield cache
    finally:
        for key in [key for key in cache if _is_mm_bf16_workspace(key)]:
            del cache[key]
        cache.update(saved)


def check_flashinfer_workspace(report, cache, capsys) -> None:
    """FlashInfer's workspace made under inference mode is kept as an inference tensor (reported), though
    its kernels write it through a raw pointer: no torch in-place op, so no crash from it."""
    if cache is None:
        show(capsys, "FlashInfer workspace", "not visible: this FlashInfer has no flashinfer.utils._cache_buf; its "
             "kernels' own scratch memory (cuBLASLt's inside the JIT module) is not a torch tensor, so it can "
             "neither be kept as an inference tensor nor be reported")
        return
    made = [buf for key, buf in cache.items() if _is_mm_bf16_workspace(key)]
    assert len(made) == 1 and made[0].is_inference(), "the run made no mm_bf16_workspace under inference mode"
    found = [r for r in report if any(path.startswith("flashinfer.utils._cache_buf[") and "mm_bf16_workspace" in path
                                      for path in (r.path, *r.other_paths))]
    assert found, report.format()
    assert Path(found[0].allocation_site.filename).name == "utils.py", found[0].describe()
    assert found[0].allocation_site.function == "_get_cache_buf", found[0].describe()
    with torch.no_grad(), pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
        made[0].zero_()  # raises before writing: an in-place torch update of it would crash serving


# ----------------------------------------------------------------------------- (b) real SGLang code

def upstream_files_of(variant: str, codemodded) -> tuple:
    if variant == "0.5.15+codemod":
        return codemodded["flashinfer_autotune"], codemodded["base_runner"]
    return su.upstream_path(variant, su.FA_MEMBER), su.upstream_path(variant, su.BR_MEMBER)


@pytest.fixture(scope="module")
def codemodded(upstream_files, tmp_path_factory):
    return su.codemod_copies(tmp_path_factory.mktemp("runtime-codemod"))


def autotune_kwargs(up) -> dict:
    """0.5.15 takes ``skip_logits`` (SGLang passes True); 0.5.23 ``run_lm_head`` (SGLang passes False)."""
    import inspect

    params = inspect.signature(up.fa.run_flashinfer_autotune_forward).parameters
    return {"skip_logits": True} if "skip_logits" in params else {"run_lm_head": False}


def upstream_entries(autotune_context=None, dummy_run=None) -> list:
    """The inference-mode entries of 0.5.15, outermost first: the autotune context's, then _dummy_run's."""
    entries = []
    if autotune_context is not None:
        entries.append((autotune_context, inference_mode_with_lines(autotune_context),
                        "flashinfer_autotune_context", "entered"))
    if dummy_run is not None:
        entries.append((dummy_run, inference_mode_with_lines(dummy_run), "BaseRunner._dummy_run", "entered"))
    return entries


def check_upstream_report(variant, recorder, report, prefix, entries, capsys, title) -> None:
    """0.5.15: both workspaces with ``entries()``; the others: no inference tensor made at all under watch(), so
    none kept. Inference tensors that earlier tests left in FlashInfer's process-wide state (made before this
    watch: no allocation) are listed, not counted."""
    text = report.format()
    if variant not in BUGGY_VARIANTS:
        text += f"\n{recorder.recorded} inference tensors made under watch()"
    show(capsys, f"sglang {variant} {title}", text)
    if variant in BUGGY_VARIANTS:
        check_workspaces(report, prefix, runner_fixed, entries())
    else:
        assert recorder.recorded == 0 and [r for r in report if r.allocation is not None] == [], text
        assert not [r for r in report if r.path.startswith(prefix)], text


@pytest.mark.slow
@pytest.mark.parametrize("device", checks.devices())
@pytest.mark.parametrize("variant", VARIANTS)
def test_sglang_dummy_run_under_watch(variant, device, codemodded, tmp_path, capsys):
    layer = runner_fixed.ToyMoELayer(device=device)
    model = su.ToyModel(layer)
    mr = su.fake_model_runner(model, device)
    max_bs = max(checks.GRAPH_BATCH_SIZES)
    fa_py, br_py = upstream_files_of(variant, codemodded)
    with su.upstream_runtime(fa_py, br_py, cache_dir=tmp_path) as up:
        runner = su.toy_runner(up.br, mr)
        buffers = su.alloc_dummy_buffers(runner, max_bs)
        with runtime.watch() as recorder:
            runner._dummy_run(max_bs, run_ctx=None, buffers=buffers)
        report = recorder.kept(named={"runner": runner, "buffers": buffers}, modules=[up.br, up.fa])
    entries = functools.partial(upstream_entries, dummy_run=br_py)
    check_upstream_report(variant, recorder, report, "runner.model_runner.model.layer", entries, capsys,
                          f"BaseRunner._dummy_run on {device}")
    if variant in BUGGY_VARIANTS:  # the report is true
        (x,) = checks.make_inputs(layer, (max_bs // 2 + 1,))
        with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
            runner_fixed.ModelRunner(layer, max_batch_size=max_bs).forward_eager(x)


@pytest.mark.slow
@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("variant", VARIANTS)
def test_sglang_flashinfer_autotune_context_under_watch(variant, flashinfer, codemodded, tmp_path, capsys):
    from flashinfer.autotuner import AutoTuner

    layer = runner_fixed.ToyMoELayer(device="cuda", dtype=torch.bfloat16, gemm=mm_bf16_gemm(flashinfer), **FI_LAYER)
    model = su.ToyModel(layer)
    mr = su.fake_model_runner(model, "cuda")
    max_bs = max(FI_GRAPH_BATCH_SIZES)
    input_ids = torch.arange(max_bs, device="cuda") % model.vocab_size
    AutoTuner.get().clear_cache()
    fa_py, br_py = upstream_files_of(variant, codemodded)
    with fresh_mm_bf16_workspace() as cache, su.upstream_runtime(fa_py, br_py, cache_dir=tmp_path) as up:
        with runtime.watch() as recorder:
            up.fa.run_flashinfer_autotune_forward(mr, lambda: model.forward(input_ids, None, None),
                                                  **autotune_kwargs(up))
            torch.cuda.synchronize()
        report = recorder.kept(named={"model_runner": mr, "autotuner": AutoTuner.get()},
                               modules=[up.br, up.fa, *flashinfer_modules()])
        entries = functools.partial(upstream_entries, autotune_context=fa_py)
        check_upstream_report(variant, recorder, report, "model_runner.model.layer", entries, capsys,
                              "run_flashinfer_autotune_forward (FlashInfer autotune, mm_bf16 cuBLASLt)")
        assert model.calls[0]["tuning"] is True and len(AutoTuner.get().profiling_cache) > 0
        if variant in BUGGY_VARIANTS:
            check_flashinfer_workspace(report, cache, capsys)


@pytest.mark.slow
@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("variant", VARIANTS)
def test_sglang_base_runner_autotune_chain_under_watch(variant, flashinfer, codemodded, tmp_path, capsys):
    from flashinfer.autotuner import AutoTuner

    layer = runner_fixed.ToyMoELayer(device="cuda", dtype=torch.bfloat16, gemm=mm_bf16_gemm(flashinfer), **FI_LAYER)
    model = su.ToyModel(layer)
    mr = su.fake_model_runner(model, "cuda")
    max_bs = max(FI_GRAPH_BATCH_SIZES)
    AutoTuner.get().clear_cache()
    fa_py, br_py = upstream_files_of(variant, codemodded)
    with fresh_mm_bf16_workspace(), su.upstream_runtime(fa_py, br_py, cache_dir=tmp_path) as up:
        runner = su.toy_runner(up.br, mr)
        buffers = su.alloc_dummy_buffers(runner, max_bs)
        with runtime.watch() as recorder:
            runner._flashinfer_autotune(buffers=buffers, batch_size=max_bs)
            torch.cuda.synchronize()
        report = recorder.kept(named={"runner": runner, "buffers": buffers, "autotuner": AutoTuner.get()},
                               modules=[up.br, up.fa, *flashinfer_modules()])
        entries = functools.partial(upstream_entries, autotune_context=fa_py, dummy_run=br_py)
        check_upstream_report(variant, recorder, report, "runner.model_runner.model.layer", entries, capsys,
                              "BaseRunner._flashinfer_autotune -> _dummy_run (FlashInfer autotune)")
    if variant in BUGGY_VARIANTS:
        (x,) = checks.make_inputs(layer, (17,))
        with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
            runner_fixed.ModelRunner(layer, max_batch_size=max_bs).forward_eager(x)


# ----------------------------------------------------------------------------- (c) FlashInfer's autotuner

@pytest.mark.gpu
@requires_cuda
def test_flashinfer_autotuner_in_the_buggy_toy_warmup(flashinfer, capsys):
    from flashinfer.autotuner import AutoTuner, autotune

    layer = runner_buggy.ToyMoELayer(device="cuda", dtype=torch.bfloat16, gemm=mm_bf16_gemm(flashinfer), **FI_LAYER)
    runner = runner_buggy.ModelRunner(layer, max_batch_size=max(FI_GRAPH_BATCH_SIZES), tuner=lambda: autotune(True))
    with fresh_mm_bf16_workspace() as cache:
        with runtime.watch() as recorder:
            runner.warmup()
        report = recorder.kept(named={"runner": runner, "autotuner": AutoTuner.get()},
                               modules=[runner_buggy, *flashinfer_modules()])
        show(capsys, f"runner_buggy warmup, flashinfer {flashinfer.__version__} autotune(True) around mm_bf16",
             report.format())
        check_workspaces(report, "runner.layer", runner_buggy, toy_buggy_entries())
        check_flashinfer_workspace(report, cache, capsys)
    (x,) = checks.make_inputs(layer, (17,))
    with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
        runner.forward_eager(x)


# ----------------------------------------------------------------------------- (d) overhead

@pytest.mark.parametrize("device", checks.devices())
def test_watch_overhead_on_the_toy_warmup(device, capsys):
    """The buggy warmup (every workspace recorded) on fresh runners: bare, watch(dispatch=False), watch()."""
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    batch = 64 if device == "cuda" else 16  # on CPU the toy's einsums, not the modes, dominate

    def timed(context) -> float:
        runner = checks.new_runner(runner_buggy, device, max_batch_size=batch)
        sync()
        start = time.perf_counter()
        with context():
            runner.warmup()
            sync()
        elapsed = time.perf_counter() - start
        assert runner.layer._ws.is_inference()
        return elapsed

    contexts = {"bare": contextlib.nullcontext, "watch(dispatch=False)": lambda: runtime.watch(dispatch=False),
                "watch()": runtime.watch}
    for context in contexts.values():  # first uses: CUDA context, kernels, the modes' imports
        timed(context)
    runs = 9 if device == "cuda" else 3
    medians = {name: statistics.median(timed(context) for _ in range(runs)) for name, context in contexts.items()}
    bare = medians["bare"]
    text = "; ".join(f"{name} {seconds * 1e3:.2f} ms ({seconds / bare:.1f}x)" for name, seconds in medians.items())
    show(capsys, f"overhead on {device}", f"toy warmup at batch {batch}, median of {runs} fresh runners: {text}")
    with runtime.watch() as recorder:
        runner = checks.new_runner(runner_buggy, device, max_batch_size=batch)
        runner.warmup()
    assert len(recorder.kept(named={"runner": runner})) == 2
