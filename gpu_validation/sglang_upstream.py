"""Load the REAL upstream SGLang runner files (fetched by fetch_upstream.py) and drive them without a server.

What is real and what is stubbed, exactly:

* Real, executed from the extracted upstream file: the whole of
  ``sglang/srt/model_executor/runner/flashinfer_autotune.py`` (``flashinfer_autotune_context``,
  ``run_flashinfer_autotune_forward``, ``flashinfer_autotune_cache_path``; in 0.5.23 also
  ``get_flashinfer_autotune_skip_ops``, ``_autotune_tactic_sync_group``, ``_autotune_process_group``) and of
  ``sglang/srt/model_executor/runner/base_runner.py`` (``BaseRunner.__init__``, ``_flashinfer_autotune``,
  ``_alloc_dummy_decode_buffers`` / ``_allocate_decode_buffers``, ``_dummy_run`` with its nested ``run_once``).
  base_runner imports the real flashinfer_autotune module loaded here (it is put in ``sys.modules`` under its
  upstream name). FlashInfer is the real package (``flashinfer.autotuner.autotune``, ``AutoTuner``,
  ``autotune_v2``, ``set_autotune_process_group``), and the GEMM under it is the real ``flashinfer.mm_bf16``.
* Stubbed (the modules below are put in ``sys.modules`` for the duration of a ``upstream_runtime`` block, and
  removed afterwards): everything else SGLang imports from those two files, at import time or at run time.
  Packages ``sglang``, ``sglang.srt``, ... are empty (``__path__ = []``), so any import not listed here fails
  loudly instead of reaching a real SGLang. See ``_stub_modules`` for the values; in short:

  - ``sglang.srt.environ.envs``: ``SGLANG_CACHE_DIR`` (a temp dir), ``SGLANG_FLASHINFER_AUTOTUNE_CACHE`` (True,
    SGLang's default), ``SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE`` / ``SGLANG_PP_PARALLEL_DEEPGEMM_WARMUP`` /
    ``SGLANG_FLASHINFER_AUTOTUNE_EXTEND`` (False)
  - ``sglang.srt.runtime_context`` (0.5.23 reads settings through it; 0.5.15 base_runner uses ``get_flags``,
    ``get_parallel``): one process, TP=PP=DP=EP=1, ``tp_group.world_size == 1`` (so no tactic-sync group),
    no skip ops, MoE backend ``"auto"`` (not megamoe), no torch.compile, no disaggregation
  - ``sglang.srt.model_executor.forward_batch_info``: ``ForwardMode`` / ``CaptureHiddenMode`` enums,
    ``ForwardBatch`` (stores its keyword arguments), ``PPProxyTensors``, ``NgramEmbeddingInfo``,
    ``enable_num_token_non_padded() -> False``, ``get_server_return_hidden_states_mode() -> NULL``
  - ``sglang.srt.model_executor.forward_context``: ``ForwardContext``, ``forward_context`` (a no-op context)
  - ``sglang.srt.layers.dp_attention``: ``DpPaddingMode``, ``set_dp_buffer_len``, ``set_is_extend_in_batch``
    (no-ops); ``sglang.srt.layers.deep_gemm_wrapper`` (``ENABLE_JIT_DEEPGEMM = False``)
  - ``sglang.srt.layers.logits_processor.autotune_dummy_run_mode`` (a context that records that it was entered;
    upstream it only sets a module flag), ``sglang.srt.layers.moe.flashinfer_megamoe_autotune`` (raises if used)
  - ``sglang.srt.batch_overlap.two_batch_overlap.TboCudaGraphRunnerPlugin``,
    ``sglang.srt.compilation.torch_compile_decoration.set_torch_compile_config`` (raises if used),
    ``sglang.srt.speculative.spec_info.create_dummy_verify_input`` (returns None: no speculative decoding),
    ``sglang.srt.utils`` (``empty_context`` = ``contextlib.nullcontext()`` as upstream's
    ``EmptyContextManager``, ``log_info_on_rank0``, ``require_*_gather`` -> False),
    ``sglang.srt.utils.common.get_eager_max_batch_size``
* Stubbed objects handed to the real code: the ``ModelRunner`` (``fake_model_runner``: device, dtype,
  ``server_args``, ``model_config``, ``forward_stream``, ``attn_backend`` whose ``init_forward_metadata`` does
  nothing, ``tp_group.barrier``, ``spec_algorithm`` that is not speculative, ...) and its ``model``
  (``ToyModel``: token embedding + the project's ``ToyMoELayer``, whose workspace ``_ws`` and index buffer
  ``_topk_idx_out`` are allocated lazily in the first forward and updated in place later). ``ToyRunner``
  subclasses the real ``BaseRunner`` only to fill in its three abstract methods (never called).
"""
from __future__ import annotations

import contextlib
import enum
import importlib.util
import logging
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import torch

from gpu_validation import fetch_upstream

RUNNER_PKG = "sglang.srt.model_executor.runner"
FA_MEMBER = "sglang/srt/model_executor/runner/flashinfer_autotune.py"
BR_MEMBER = "sglang/srt/model_executor/runner/base_runner.py"
VERSIONS = tuple(fetch_upstream.PINS)  # ("0.5.15", "0.5.23")
BUGGY, FIXED = "0.5.15", "0.5.23"


def upstream_path(version: str, member: str) -> Path:
    return fetch_upstream.path_of(version, member)


# --------------------------------------------------------------------------- stubs

class _Env:
    def __init__(self, value):
        self.value = value

    def get(self):
        return self.value


class _Envs:
    """Only the variables the two files read; any other raises AttributeError."""

    def __init__(self, cache_dir: Path, autotune_cache: bool):
        self.SGLANG_CACHE_DIR = _Env(str(cache_dir))
        self.SGLANG_FLASHINFER_AUTOTUNE_CACHE = _Env(autotune_cache)
        self.SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE = _Env(False)
        self.SGLANG_PP_PARALLEL_DEEPGEMM_WARMUP = _Env(False)
        self.SGLANG_FLASHINFER_AUTOTUNE_EXTEND = _Env(False)


class ForwardMode(enum.IntEnum):
    EXTEND = 1
    DECODE = 2
    TARGET_VERIFY = 3


class CaptureHiddenMode(enum.IntEnum):
    NULL = 0
    LAST = 1
    FULL = 2

    def need_capture(self) -> bool:
        return self != CaptureHiddenMode.NULL


class ForwardBatch(SimpleNamespace):
    """Keeps what ``_dummy_run`` builds it with."""


class PPProxyTensors:
    def __init__(self, tensors: dict):
        self.tensors = tensors


class _PaddingMode:
    def is_max_len(self) -> bool:
        return False


class DpPaddingMode:
    @staticmethod
    def get_default_mode_in_cuda_graph():
        return _PaddingMode()


class TboCudaGraphRunnerPlugin:
    pass


def _must_not_be_called(name: str):
    def fn(*args, **kwargs):
        raise AssertionError(f"stub {name} was called: the test configuration should not reach it")
    return fn


@contextlib.contextmanager
def _noop_context(*args, **kwargs):
    yield


class StubRecord:
    """What the stubs saw: lets a test check that the real code took the path it expects."""

    def __init__(self):
        self.autotune_dummy_run_mode = []  # kwargs of each entry
        self.set_dp_buffer_len = []
        self.forward_context = 0


def _runtime_context(world_size: int = 1):
    tp_group = SimpleNamespace(world_size=world_size, cpu_group=None, barrier=lambda: None)
    parallel = SimpleNamespace(
        tp_size=1, pp_size=1, dp_size=1, attn_dp_size=1, moe_ep_size=1, tp_rank=0, pp_rank=0, dp_rank=0,
        attn_tp_size=1, attn_tp_rank=0, attn_cp_size=1, num_dp_ranks=1, enable_kv_cache_sharding=False,
        tp_group=tp_group)
    exec_ = SimpleNamespace(
        kernel=SimpleNamespace(flashinfer_autotune_skip_ops=None, disable_flashinfer_autotune=False),
        deterministic=SimpleNamespace(enable_deterministic_inference=False),
        moe=SimpleNamespace(moe_runner_backend="auto", moe_a2a_backend="none"),
        features=SimpleNamespace(enable_encoder_swa_bounded_replay=False))
    model = SimpleNamespace(model_path="gradmode-lint/toy-moe", quantization=None,
                            override=lambda **kw: contextlib.nullcontext())
    flags = SimpleNamespace(capture=SimpleNamespace(enable_torch_compile=False))
    return {
        "get_parallel": lambda: parallel,
        "get_exec": lambda: exec_,
        "get_model": lambda: model,
        "get_flags": lambda: flags,
        "get_disagg": lambda: SimpleNamespace(disaggregation_mode="null", enable_pdmux=False),
        "get_schedule": lambda: SimpleNamespace(max_prefill_tokens=16384),
        "get_spec": lambda: SimpleNamespace(speculative_moe_runner_backend=None, speculative_moe_a2a_backend=None),
        "max_prefill_buffer_tokens": lambda: None,
        "max_speculative_num_draft_tokens": lambda: None,
    }


def _stub_modules(cache_dir: Path, record: StubRecord, autotune_cache: bool) -> dict[str, dict]:
    """module name -> attributes. Parent packages are created empty."""

    @contextlib.contextmanager
    def autotune_dummy_run_mode(**kwargs):
        record.autotune_dummy_run_mode.append(kwargs)
        yield

    @contextlib.contextmanager
    def forward_context(ctx, **kwargs):
        record.forward_context += 1
        yield

    def set_dp_buffer_len(*args):
        record.set_dp_buffer_len.append(args)

    return {
        "sglang.srt.environ": {"envs": _Envs(cache_dir, autotune_cache)},
        "sglang.srt.runtime_context": _runtime_context(),
        "sglang.srt.batch_overlap.two_batch_overlap": {"TboCudaGraphRunnerPlugin": TboCudaGraphRunnerPlugin},
        "sglang.srt.compilation.torch_compile_decoration": {
            "set_torch_compile_config": _must_not_be_called("set_torch_compile_config")},
        "sglang.srt.layers.deep_gemm_wrapper": {"ENABLE_JIT_DEEPGEMM": False},
        "sglang.srt.layers.dp_attention": {"DpPaddingMode": DpPaddingMode, "set_dp_buffer_len": set_dp_buffer_len,
                                           "set_is_extend_in_batch": lambda flag: None},
        "sglang.srt.layers.logits_processor": {"autotune_dummy_run_mode": autotune_dummy_run_mode},
        "sglang.srt.layers.moe.flashinfer_megamoe_autotune": {
            "megamoe_autotune_context": _must_not_be_called("megamoe_autotune_context")},
        "sglang.srt.model_executor.forward_batch_info": {
            "CaptureHiddenMode": CaptureHiddenMode, "ForwardBatch": ForwardBatch, "ForwardMode": ForwardMode,
            "NgramEmbeddingInfo": SimpleNamespace, "PPProxyTensors": PPProxyTensors,
            "enable_num_token_non_padded": lambda: False,
            "get_server_return_hidden_states_mode": lambda: CaptureHiddenMode.NULL},
        "sglang.srt.model_executor.forward_context": {"ForwardContext": SimpleNamespace,
                                                      "forward_context": forward_context},
        "sglang.srt.speculative.spec_info": {"create_dummy_verify_input": lambda *args, **kwargs: None},
        "sglang.srt.utils": {
            "empty_context": lambda *args, **kwargs: contextlib.nullcontext(),
            "log_info_on_rank0": lambda logger, msg: logger.info(msg),
            "require_attn_tp_gather": lambda *args: False,
            "require_gathered_buffer": lambda *args: False,
            "require_mlp_tp_gather": lambda *args: False},
        "sglang.srt.utils.common": {"get_eager_max_batch_size": lambda n: n},
    }


def _exec_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def upstream_runtime(flashinfer_autotune_py: Path, base_runner_py: Path, cache_dir: Path,
                     autotune_cache: bool = True) -> Iterator[SimpleNamespace]:
    """Install the stubs, load the two real files under their upstream module names, restore sys.modules after.

    Yields a namespace with ``fa`` (the flashinfer_autotune module), ``br`` (the base_runner module),
    ``record`` (a StubRecord) and ``envs``.
    """
    record = StubRecord()
    stubs = _stub_modules(Path(cache_dir), record, autotune_cache)
    names = set(stubs) | {f"{RUNNER_PKG}.flashinfer_autotune", f"{RUNNER_PKG}.base_runner"}
    for name in list(names):
        parts = name.split(".")
        names.update(".".join(parts[:i]) for i in range(1, len(parts)))
    saved = {name: sys.modules.get(name) for name in names}
    try:
        for name in sorted(names, key=lambda n: n.count(".")):
            module = types.ModuleType(name)
            if name not in stubs:
                module.__path__ = []  # an empty package: unlisted submodules fail to import
            module.__dict__.update(stubs.get(name, {}))
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
        sys.modules["sglang.srt.utils"].__path__ = []  # also a package (utils.common)
        sys.modules["sglang.srt.layers"].__path__ = []
        fa = _exec_file(f"{RUNNER_PKG}.flashinfer_autotune", Path(flashinfer_autotune_py))
        setattr(sys.modules[RUNNER_PKG], "flashinfer_autotune", fa)
        br = _exec_file(f"{RUNNER_PKG}.base_runner", Path(base_runner_py))
        yield SimpleNamespace(fa=fa, br=br, record=record, envs=stubs["sglang.srt.environ"]["envs"])
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


# --------------------------------------------------------------------------- model runner stand-ins

class ToyModel:
    """``model.forward(input_ids, positions, forward_batch)``: embedding lookup, then the project's ToyMoELayer.

    Records, for every call, whether inference mode was on, whether FlashInfer's autotuner was in tuning mode,
    and on which CUDA stream it ran.
    """

    def __init__(self, layer, vocab_size: int = 32, seed: int = 7):
        self.layer = layer
        self.vocab_size = vocab_size
        gen = torch.Generator(device="cpu").manual_seed(seed)
        self.embed = torch.randn(vocab_size, layer.hidden_size, generator=gen).to(device=layer.device,
                                                                                  dtype=layer.dtype)
        self.calls: list[dict] = []

    def hidden_states(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed[input_ids]

    def forward(self, input_ids, positions, forward_batch, **kwargs):
        call = {"num_tokens": int(input_ids.shape[0]), "inference_mode": torch.is_inference_mode_enabled(),
                "grad_enabled": torch.is_grad_enabled(), "kwargs": sorted(kwargs)}
        try:
            from flashinfer.autotuner import AutoTuner
            call["tuning"] = bool(AutoTuner.get().is_tuning_mode)
        except ImportError:
            call["tuning"] = None
        if self.layer.device.type == "cuda":
            call["stream"] = torch.cuda.current_stream(self.layer.device).cuda_stream
        self.calls.append(call)
        return self.layer.forward(self.hidden_states(input_ids))


def fake_model_runner(model: ToyModel, device) -> SimpleNamespace:
    """The ModelRunner attributes the two upstream files read (both versions), nothing more."""
    device = torch.device(device)
    layer = model.layer
    hf_config = type("ToyMoeConfig", (), {})()
    model_config = SimpleNamespace(hidden_size=layer.hidden_size, vocab_size=model.vocab_size, dtype=layer.dtype,
                                   is_encoder_decoder=False, hf_config=hf_config, quantization=None)
    server_args = SimpleNamespace(
        tp_size=1, dp_size=1, pp_size=1, model_path="gradmode-lint/toy-moe", quantization=None,
        moe_runner_backend="auto", moe_a2a_backend="none", enable_return_hidden_states=False, enable_lora=False,
        speculative_num_draft_tokens=None, flashinfer_allreduce_fusion_backend=None,
        disable_flashinfer_autotune=False)
    spec_algorithm = SimpleNamespace(is_speculative=lambda: False, is_eagle=lambda: False,
                                     is_standalone=lambda: False)
    attn_backend = SimpleNamespace(get_cuda_graph_seq_len_fill_value=lambda: 1,
                                   init_forward_metadata=lambda forward_batch: None)
    return SimpleNamespace(
        device=device.type, gpu_id=device.index or 0, dtype=layer.dtype, model=model, model_config=model_config,
        server_args=server_args, spec_algorithm=spec_algorithm, attn_backend=attn_backend,
        is_generation=True, is_draft_worker=False,
        tp_size=1, pp_size=1, dp_size=1, moe_ep_size=1, tp_rank=0, pp_rank=0, dp_rank=0,
        tp_group=SimpleNamespace(barrier=lambda: None, world_size=1),
        forward_stream=torch.cuda.Stream(device=device) if device.type == "cuda" else None,
        lora_manager=None, canary_manager=None,
        ngram_embedding_manager=SimpleNamespace(enabled=False, table=None),
        kv_index_translator=SimpleNamespace(bind_runner_slots=lambda forward_batch: None),
        prepare_dummy_forward_batch=lambda forward_batch: forward_batch,
        get_pp_proxy_topk_size=lambda: None, get_pp_proxy_residual_num_blocks=lambda: None,
        max_running_requests=64,
    )


def toy_runner(br: types.ModuleType, model_runner):
    """A concrete subclass of the real ``BaseRunner`` (its abstract methods filled in, never called)."""

    class ToyRunner(br.BaseRunner):
        def can_run_graph(self, forward_batch):
            raise AssertionError("not used")

        def load_batch(self, forward_batch, **kwargs):
            raise AssertionError("not used")

        def execute(self, forward_batch, **kwargs):
            raise AssertionError("not used")

    return ToyRunner(model_runner)


def alloc_dummy_buffers(runner, max_bs: int):
    """The real ``_alloc_dummy_decode_buffers`` (its signature is the same for one token per request)."""
    return runner._alloc_dummy_decode_buffers(max_bs)


logging.getLogger(f"{RUNNER_PKG}.flashinfer_autotune").setLevel(logging.WARNING)


# --------------------------------------------------------------------------- the project's CLIs

REPO_ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, timeout: int = 300):
    """``python -m <args>`` from the repository root, with the checkout on PYTHONPATH."""
    import os
    import subprocess

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def lint_json(*paths: Path) -> dict:
    """``python -m lints PATH... --format json --no-cache``; asserts exit 0/1 and no errors."""
    import json

    proc = run_cli("lints", *map(str, paths), "--format", "json", "--no-cache")
    assert proc.returncode in (0, 1), f"lint exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    report = json.loads(proc.stdout)
    assert report.get("errors", []) == [], report["errors"]
    assert (proc.returncode == 1) == bool(report["findings"]), (proc.returncode, report["findings"])
    return report


def codemod_copies(dest: Path, version: str = BUGGY) -> dict[str, Path]:
    """Copy ``version``'s two files to ``dest/<version>/`` and run ``python -m lints.codemod`` on that folder.

    Returns {"flashinfer_autotune": path, "base_runner": path, "codemod_stdout": ..., ...}.
    """
    import shutil

    out = Path(dest) / f"sglang-{version}-codemod"
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for key, member in (("flashinfer_autotune", FA_MEMBER), ("base_runner", BR_MEMBER)):
        paths[key] = out / Path(member).name
        shutil.copyfile(upstream_path(version, member), paths[key])
    proc = run_cli("lints.codemod", str(out))
    assert proc.returncode in (0, 1), f"codemod exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    paths["codemod_output"] = proc.stdout + proc.stderr
    return paths
