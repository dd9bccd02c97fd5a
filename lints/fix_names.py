"""The names a fix writes or removes: whether a module uses ``torch``, ``contextlib`` or ``__all__`` for
anything but the module (``plans_for`` refuses a fix that would write such a name), its
``from torch import inference_mode`` imports, which of its imports are unused; dotted names. Part of the fixes
(``lints.fixer``)."""
from __future__ import annotations

from typing import Optional

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import GatherUnusedImportsVisitor
from libcst.metadata import MetadataWrapper

_INFERENCE_MODE_MODULES = ("torch", "torch.autograd", "torch.autograd.grad_mode")


class _NameUses(cst.CSTVisitor):
    """Whether ``name`` is used anywhere other than in ``import name``, ``from name import ...`` and
    ``name.attr``: bound (assigned, a parameter, a def, ``import x as name``...) or read bare."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.found = False

    def visit_Import(self, node: cst.Import) -> bool:
        self.found |= any(alias.asname is not None and _bound_name(alias) == self.name
                          and _dotted(alias.name) != self.name for alias in node.names)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if not isinstance(node.names, cst.ImportStar):
            self.found |= any(_bound_name(alias) == self.name for alias in node.names)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # `f(name=...)` names a parameter of f, no variable here
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if not (isinstance(node.value, cst.Name) and node.value.value == self.name):
            node.value.visit(self)
        return False  # `.attr` names no variable

    def visit_Name(self, node: cst.Name) -> None:
        self.found |= node.value == self.name


def _bound_name(alias: cst.ImportAlias) -> Optional[str]:
    if alias.asname is not None:
        return alias.asname.name.value if isinstance(alias.asname.name, cst.Name) else None
    return _dotted(alias.name)


def _uses_name_otherwise(module: cst.Module, name: str) -> bool:
    uses = _NameUses(name)
    module.visit(uses)
    return uses.found


def inference_mode_imports(module: cst.Module) -> list[tuple[cst.ImportAlias, str, Optional[str]]]:
    """``from torch import inference_mode [as x]`` statements at any depth of the module's top level."""
    found = []
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar) and small.module:
                source = _dotted(small.module)
                if source in _INFERENCE_MODE_MODULES:
                    for alias in small.names:
                        if isinstance(alias.name, cst.Name) and alias.name.value == "inference_mode":
                            asname = alias.asname.name.value if alias.asname and isinstance(
                                alias.asname.name, cst.Name) else None
                            found.append((alias, source, asname))
    return found


def _unused_imports(module: cst.Module) -> set[cst.ImportAlias]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    wrapper.resolve_many(GatherUnusedImportsVisitor.get_inherited_dependencies())
    gather = GatherUnusedImportsVisitor(CodemodContext(wrapper=wrapper))
    module.visit(gather)
    return {alias for alias, _ in gather.unused_imports}


def _dotted(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        head = _dotted(expr.value)
        return f"{head}.{expr.attr.value}" if head else None
    return None
