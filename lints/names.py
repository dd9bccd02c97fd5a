"""Which expressions are torch's grad-mode switches and tensor factories.

The single place where aliases are resolved: ``import torch as th``,
``from torch import inference_mode as im``, ``torch.autograd.grad_mode...``.
Resolution goes through libcst's QualifiedNameProvider (backed by
ScopeProvider), so a local function that happens to be called
``inference_mode`` is not torch's.
"""
from __future__ import annotations

import re
from typing import Callable, Collection, Optional

import libcst as cst
from libcst.metadata import QualifiedName

INFERENCE_MODE = "inference_mode"
NO_GRAD = "no_grad"

GRAD_MODE_NAMES = {
    "torch.inference_mode": INFERENCE_MODE,
    "torch.autograd.inference_mode": INFERENCE_MODE,
    "torch.autograd.grad_mode.inference_mode": INFERENCE_MODE,
    "torch.no_grad": NO_GRAD,
    "torch.autograd.no_grad": NO_GRAD,
    "torch.autograd.grad_mode.no_grad": NO_GRAD,
}

TORCH_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "empty", "zeros", "ones", "full", "empty_strided",
        "empty_like", "zeros_like", "ones_like", "full_like",
        "rand_like", "randn_like", "randint_like",
    )
)
# Tensor-method factories: the receiver is any tensor, so match by method name.
TENSOR_METHOD_FACTORIES = frozenset(
    {"new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided", "new_tensor"}
)
CACHE_DECORATORS = frozenset({"functools.cache", "functools.lru_cache", "functools.cached_property"})
CONTEXTMANAGER_DECORATORS = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager"})

# `fill_`, `zero_`, `copy_`, `index_put_` ... but not `__init__` or `_private_`.
_INPLACE_METHOD = re.compile(r"^[a-z][a-z0-9_]*[a-z0-9]_$")
# Methods that return a view of their receiver: writing through them writes the buffer.
VIEW_METHODS = frozenset(
    {"view", "view_as", "narrow", "as_strided", "select", "unsqueeze", "squeeze", "flatten",
     "transpose", "t", "permute", "expand", "expand_as", "unflatten", "diagonal", "unbind", "split", "chunk"}
)

QualifiedNamesOf = Callable[[cst.CSTNode], Collection[QualifiedName]]


def is_inplace_method(name: str) -> bool:
    return bool(_INPLACE_METHOD.match(name)) and not name.startswith("__")


def grad_mode_of(expr: cst.BaseExpression, qnames: QualifiedNamesOf) -> Optional[str]:
    """INFERENCE_MODE / NO_GRAD when ``expr`` (a Name or Attribute) names torch's switch."""
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    for qn in qnames(expr):
        mode = GRAD_MODE_NAMES.get(qn.name)
        if mode:
            return mode
    return None


def full_names(expr: cst.CSTNode, qnames: QualifiedNamesOf) -> set[str]:
    return {qn.name for qn in qnames(expr)}


def enables_mode(call: cst.Call) -> bool:
    """False only for a literal off switch: ``inference_mode(False)``/``(mode=False)``.

    A non-literal argument (``inference_mode(flag)``) is not reported: we cannot
    know the value, and guessing produces false positives.
    """
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value == "mode":
            value = arg.value
            if isinstance(value, cst.Name) and value.value == "True":
                return True
            return False
    return True


def dotted(expr: cst.BaseExpression) -> Optional[str]:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        head = dotted(expr.value)
        return f"{head}.{expr.attr.value}" if head else None
    return None


def leaf_name(expr: cst.BaseExpression) -> Optional[str]:
    """The last name of an expression or of what a call calls: ``capture`` for ``self.runner.capture()``."""
    if isinstance(expr, cst.Call):
        expr = expr.func
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def callee_name(call: cst.Call) -> Optional[str]:
    return leaf_name(call.func)
