"""torch's grad-mode switches, tensor factories and in-place operations, by full name.

The single place that knows torch's spellings; names are resolved to full names by
``lints.project`` first, so ``import torch as th``, ``from torch import inference_mode as im`` and
``getattr(torch, "inference_mode")`` all arrive here as ``torch.inference_mode``, and a local
function that happens to be called ``inference_mode`` never does.
"""
from __future__ import annotations

import re
from typing import Optional

INFERENCE_MODE_NAMES = frozenset({
    "torch.inference_mode", "torch.autograd.inference_mode", "torch.autograd.grad_mode.inference_mode",
})
NO_GRAD_NAMES = frozenset({"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})
ENABLE_GRAD_NAMES = frozenset({"torch.enable_grad", "torch.autograd.enable_grad",
                               "torch.autograd.grad_mode.enable_grad"})
SET_GRAD_ENABLED_NAMES = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
                                    "torch.autograd.grad_mode.set_grad_enabled"})
C_INFERENCE_MODE = "torch._C._InferenceMode"
# A bare reference used as a decorator (`@torch.inference_mode`) enables the mode.
GRAD_MODE_CLASSES = {**{n: "inference_mode" for n in INFERENCE_MODE_NAMES}, **{n: "no_grad" for n in NO_GRAD_NAMES}}
# nn.Module methods that return the module itself (the class of `Model(cfg).cuda()` is Model's).
MODULE_RETURNING_METHODS = frozenset({"cuda", "cpu", "to", "half", "float", "double", "bfloat16", "eval", "train",
                                      "requires_grad_", "to_empty", "share_memory", "apply", "xpu"})
# Method names that platform wrappers use for a switch (`current_platform.inference_mode()`).
SWITCH_LEAVES = frozenset({"inference_mode", "no_grad"})
CONTEXTMANAGERS = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager"})
CACHE_DECORATORS = frozenset({"functools.cache", "functools.lru_cache", "functools.cached_property"})
# Decorators of kernels that write through pointers: their argument updates never raise.
KERNEL_DECORATOR_PREFIXES = ("triton.", "numba.", "cupy.", "tilelang.", "cutlass.", "cute.")
KERNEL_DECORATOR_LEAVES = frozenset({"jit", "autotune", "heuristics", "kernel"})

TORCH_FACTORIES = frozenset(
    f"torch.{name}"
    for name in ("empty", "zeros", "ones", "full", "empty_strided", "empty_like", "zeros_like", "ones_like",
                 "full_like", "rand_like", "randn_like", "randint_like", "arange", "rand", "randn")
)
# Tensor-method factories: the receiver is any tensor, so they are matched by method name.
TENSOR_METHOD_FACTORIES = frozenset({"new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided",
                                     "new_tensor"})
# Calls whose result is always a new tensor, never their argument or receiver nor a view of it (checked
# against torch: `torch.roll(b, 1)[0] = x` does not write `b`, `b.reshape(-1)`, `b.detach()`, `b.to(...)`
# and `b.contiguous()` may give `b`'s own storage back).
FRESH_TENSOR_FUNCTIONS = TORCH_FACTORIES | frozenset(
    f"torch.{name}" for name in ("clone", "roll", "flip", "cat", "concat", "concatenate", "stack",
                                 "repeat_interleave"))
FRESH_TENSOR_METHODS = TENSOR_METHOD_FACTORIES | frozenset({"clone", "roll", "flip", "repeat",
                                                            "repeat_interleave"})
# `fill_`, `zero_`, `copy_`, `index_put_` ... but not `__init__` or `_private_`.
_INPLACE_METHOD = re.compile(r"^[a-z][a-z0-9_]*[a-z0-9]_$")
# Methods returning a view of their receiver: writing through them writes the buffer.
VIEW_METHODS = frozenset({"view", "view_as", "narrow", "as_strided", "select", "unsqueeze", "squeeze", "flatten",
                          "transpose", "t", "permute", "expand", "expand_as", "unflatten", "diagonal", "reshape",
                          "contiguous"})
# Calls whose result is a CUDA graph being captured / an autotuning region.
GRAPH_CAPTURE_NAMES = frozenset({"torch.cuda.graph", "torch.cuda.graphs.graph", "torch.cuda.make_graphed_callables"})
AUTOTUNE_PREFIXES = ("flashinfer.",)

# Calls the analysis finds by the last part of the callee's name before it resolves them: what
# captures a CUDA graph or autotunes (the name is resolved next), a graph's `replay()`, tensor
# factories, what grows a kept list or dict (`BUFFERS.append(t)`, `pool.setdefault(k, t)`) and a
# module's `register_buffer`. Summaries list these calls per function (``notable``, with the in-place
# updates: ``is_notable_call``), so that no pass of the analysis walks every call of the project; a word
# added here is found everywhere.
SEMANTIC_LEAVES = frozenset({"graph", "capture_begin", "autotune", "autotune_v2", "make_graphed_callables"})
REPLAY_LEAF = "replay"
FACTORY_LEAVES = frozenset(name.rsplit(".", 1)[1] for name in TORCH_FACTORIES) | TENSOR_METHOD_FACTORIES
CONTAINER_INSERTS = frozenset({"append", "setdefault", "insert", "add"})
REGISTER_BUFFER = "register_buffer"
NOTABLE_CALL_LEAVES = SEMANTIC_LEAVES | FACTORY_LEAVES | CONTAINER_INSERTS | {REPLAY_LEAF, REGISTER_BUFFER}


def is_notable_call(leaf: str, kwargs: dict) -> bool:
    """Whether a call whose callee's name ends in ``leaf`` is one of its function's ``notable`` calls: a word
    of ``NOTABLE_CALL_LEAVES``, an in-place update by its name (``fill_``), or a write through ``out=``."""
    return leaf in NOTABLE_CALL_LEAVES or "out" in kwargs or is_inplace_method(leaf)


# In place by name, but no write of the tensor's data (torch allows them on an inference tensor).
_NOT_DATA_UPDATES = frozenset({"requires_grad_"})
# torch's function forms of in-place updates: `torch.clamp_(b, ...)`, `torch.Tensor.copy_(b, x)`,
# `torch.nn.init.zeros_(b)` (not `torch.nn.utils.clip_grad_norm_`, which writes `.grad`).
INPLACE_FUNCTION_MODULES = ("torch", "torch.Tensor", "torch.nn.init")


def is_inplace_method(name: str) -> bool:
    found = _inplace_names.get(name)
    if found is None:  # asked for every call of a project: a few thousand names, asked many times each
        found = _inplace_names[name] = bool(_INPLACE_METHOD.match(name)) and not name.startswith("__") \
            and name not in _NOT_DATA_UPDATES
    return found


_inplace_names: dict[str, bool] = {}


def _literal(expr: Optional[list]):
    """(True, value) for a constant, (False, None) otherwise."""
    if expr is not None and expr[0] == "k":
        return True, expr[1]
    return False, None


def switch_mode(full: str, args: list, kwargs: dict) -> Optional[str]:
    """The grad mode a call of torch's ``full`` switches to, None when it is not one.

    ``inference_mode()``/``(True)``/``(mode=True)`` enable it, ``(False)`` disables it
    (``inference_off``); a non-literal argument is ``unknown`` (not reported); a non-bool literal
    such as ``inference_mode(1)`` is taken by torch as a function to decorate, not a mode: None.
    """
    argument = kwargs.get("mode", args[0] if args else None)
    if full in INFERENCE_MODE_NAMES or full == C_INFERENCE_MODE:
        if argument is None:
            return None if full == C_INFERENCE_MODE else "inference_mode"
        is_literal, value = _literal(argument)
        if not is_literal:
            return "unknown"
        if value is True:
            return "inference_mode"
        return "inference_off" if value is False else None
    if full in NO_GRAD_NAMES:
        return "no_grad"
    if full in ENABLE_GRAD_NAMES:
        return "enable_grad"
    if full in SET_GRAD_ENABLED_NAMES:
        is_literal, value = _literal(kwargs.get("mode", args[0] if args else None))
        if is_literal and isinstance(value, bool):
            return "enable_grad" if value else "no_grad"
        return "unknown"
    return None


def is_autotune(full: str) -> bool:
    return full.startswith(AUTOTUNE_PREFIXES) and full.rsplit(".", 1)[-1] in ("autotune", "autotune_v2")


def is_kernel_decorator(full: str) -> bool:
    return full.startswith(KERNEL_DECORATOR_PREFIXES) or (
        "." in full and full.rsplit(".", 1)[-1] in KERNEL_DECORATOR_LEAVES and "triton" in full)
