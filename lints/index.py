"""One traversal of a module that records the syntax facts every rule needs.

The rules, the path classifier and the lazy-buffer detector all read this
index instead of walking the tree again, so a file is parsed once and its
names are resolved once.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Union

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider

from . import names

FunctionNode = cst.FunctionDef


@dataclasses.dataclass(frozen=True, eq=False)
class Guard:
    """An enclosing ``if``: ``in_orelse`` is True inside its ``else``."""

    node: cst.If
    in_orelse: bool


@dataclasses.dataclass(frozen=True, eq=False)
class Frame:
    """Lexical context of a fact inside its function."""

    withs: tuple[Union[cst.With], ...] = ()
    guards: tuple[Guard, ...] = ()


@dataclasses.dataclass(eq=False)
class ClassInfo:
    node: cst.ClassDef
    name: str
    line: int
    bases: tuple[str, ...]
    methods: dict[str, "FunctionInfo"] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(eq=False)
class Decorator:
    node: cst.Decorator
    qualified: frozenset[str]
    text: Optional[str]


@dataclasses.dataclass(eq=False)
class CallSite:
    node: cst.Call
    function: "FunctionInfo"
    frame: Frame
    line: int
    col: int
    callee: Optional[str]
    receiver: Optional[str]
    qualified: frozenset[str]


@dataclasses.dataclass(eq=False)
class AssignFact:
    node: Union[cst.Assign, cst.AnnAssign, cst.AugAssign]
    targets: tuple[cst.BaseExpression, ...]
    value: Optional[cst.BaseExpression]
    function: "FunctionInfo"
    frame: Frame
    line: int
    col: int


@dataclasses.dataclass(eq=False)
class ReturnFact:
    node: Union[cst.Return, cst.Yield]
    value: Optional[cst.BaseExpression]
    function: "FunctionInfo"
    frame: Frame
    line: int
    col: int


@dataclasses.dataclass(eq=False)
class GradModeRef:
    """A reference to torch.inference_mode / torch.no_grad (called or bare)."""

    mode: str
    expr: cst.BaseExpression  # the Call, or the bare Name/Attribute
    reference: cst.BaseExpression  # the Name/Attribute naming torch's switch
    enabled: bool
    role: str  # "with" | "decorator" | "object"
    function: "FunctionInfo"
    frame: Frame
    line: int
    col: int
    owner: Optional[cst.CSTNode]  # the With / Decorator it belongs to


@dataclasses.dataclass(eq=False)
class FunctionInfo:
    node: Optional[FunctionNode]  # None for the module's top level
    name: str
    qualname: str
    line: int
    col: int
    cls: Optional[ClassInfo]
    parent: Optional["FunctionInfo"]
    decorators: list[Decorator] = dataclasses.field(default_factory=list)
    nested: dict[str, "FunctionInfo"] = dataclasses.field(default_factory=dict)
    calls: list[CallSite] = dataclasses.field(default_factory=list)
    assigns: list[AssignFact] = dataclasses.field(default_factory=list)
    returns: list[ReturnFact] = dataclasses.field(default_factory=list)
    grad_refs: list[GradModeRef] = dataclasses.field(default_factory=list)

    @property
    def label(self) -> str:
        return "module level" if self.node is None else f"`{self.qualname}()`"

    def decorated_with(self, qualified: frozenset[str] | set[str]) -> bool:
        return any(d.qualified & qualified for d in self.decorators)


@dataclasses.dataclass(eq=False)
class ModuleIndex:
    module: cst.Module
    path: str
    top: FunctionInfo
    functions: list[FunctionInfo]
    classes: dict[str, ClassInfo]
    with_statements: dict[cst.With, tuple[FunctionInfo, Frame, int, int]]
    call_sites: dict[cst.Call, CallSite] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.call_sites = {call.node: call for fn in self.functions for call in fn.calls}

    def all_grad_refs(self) -> list[GradModeRef]:
        return [ref for fn in self.functions for ref in fn.grad_refs]


# Leaf names whose qualified names we resolve; everything else is skipped to
# keep resolution off the hot path.
_RESOLVED_LEAVES = (
    {"inference_mode", "no_grad", "contextmanager", "asynccontextmanager", "cache", "lru_cache", "cached_property"}
    | {qn.rsplit(".", 1)[1] for qn in names.TORCH_FACTORIES}
)


class _Indexer(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    def __init__(self, module: cst.Module, path: str) -> None:
        super().__init__()
        self.top = FunctionInfo(None, "<module>", "<module>", 1, 0, None, None)
        self.functions: list[FunctionInfo] = [self.top]
        self.classes: dict[str, ClassInfo] = {}
        self.with_statements: dict[cst.With, tuple[FunctionInfo, Frame, int, int]] = {}
        self._fn_stack: list[FunctionInfo] = [self.top]
        self._cls_stack: list[Optional[ClassInfo]] = [None]
        # Per function: enclosing with-bodies and if-branches.
        self._withs: list[list[cst.With]] = [[]]
        self._guards: list[list[Guard]] = [[]]
        self._roles: dict[int, tuple[str, cst.CSTNode]] = {}
        self._not_references: set[int] = set()  # callees and `.attr` names
        self._aliases: set[str] = set(_RESOLVED_LEAVES)
        self.module = module
        self.path = path

    # helpers -------------------------------------------------------------
    def _pos(self, node: cst.CSTNode) -> tuple[int, int]:
        start = self.get_metadata(PositionProvider, node).start
        return start.line, start.column

    def _qualified(self, expr: cst.BaseExpression) -> frozenset[str]:
        leaf = names.leaf_name(expr)
        if leaf is None or leaf not in self._aliases:
            dotted = names.dotted(expr.func if isinstance(expr, cst.Call) else expr)
            if not (dotted and dotted.startswith("torch.ops.")):
                return frozenset()
        target = expr.func if isinstance(expr, cst.Call) else expr
        return frozenset(qn.name for qn in self.get_metadata(QualifiedNameProvider, target, set()))

    def _frame(self) -> Frame:
        return Frame(tuple(self._withs[-1]), tuple(self._guards[-1]))

    @property
    def _fn(self) -> FunctionInfo:
        return self._fn_stack[-1]

    # imports: remember aliases of the names we resolve; names in an import
    # statement are not references, so do not descend ------------------------
    def _remember_aliases(self, aliases: Sequence[cst.ImportAlias]) -> None:
        for alias in aliases:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                imported = names.dotted(alias.name) or ""
                if imported.rsplit(".", 1)[-1] in _RESOLVED_LEAVES:
                    self._aliases.add(alias.asname.name.value)

    def visit_Import(self, node: cst.Import) -> bool:
        self._remember_aliases(node.names)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if not isinstance(node.names, cst.ImportStar):
            self._remember_aliases(node.names)
        return False

    # scopes ----------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        line, _ = self._pos(node)
        bases = tuple(filter(None, (names.dotted(arg.value) for arg in node.bases)))
        info = ClassInfo(node, node.name.value, line, bases)
        self.classes.setdefault(info.name, info)
        self._cls_stack.append(info)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._cls_stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        line, col = self._pos(node)
        cls = self._cls_stack[-1]
        parent = self._fn if self._fn is not self.top else None
        if parent is not None:
            qualname = f"{parent.qualname}.{node.name.value}"
        elif cls is not None:
            qualname = f"{cls.name}.{node.name.value}"
        else:
            qualname = node.name.value
        info = FunctionInfo(node, node.name.value, qualname, line, col, cls, parent)
        self._not_references.add(id(node.name))
        for dec in node.decorators:
            info.decorators.append(Decorator(dec, self._qualified(dec.decorator), names.dotted(
                dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator)))
            self._roles[id(dec.decorator)] = ("decorator", dec)
        if parent is not None:
            parent.nested.setdefault(info.name, info)
        elif cls is not None:
            cls.methods.setdefault(info.name, info)
        else:
            self.top.nested.setdefault(info.name, info)
        self.functions.append(info)
        self._fn_stack.append(info)
        self._cls_stack.append(None)
        self._withs.append([])
        self._guards.append([])

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._fn_stack.pop()
        self._cls_stack.pop()
        self._withs.pop()
        self._guards.pop()

    # lexical context -------------------------------------------------------
    def visit_With(self, node: cst.With) -> None:
        line, col = self._pos(node)
        self.with_statements[node] = (self._fn, self._frame(), line, col)
        for item in node.items:
            self._roles[id(item.item)] = ("with", node)

    def visit_With_body(self, node: cst.With) -> None:
        self._withs[-1].append(node)

    def leave_With_body(self, node: cst.With) -> None:
        self._withs[-1].pop()

    def visit_If_body(self, node: cst.If) -> None:
        self._guards[-1].append(Guard(node, False))

    def leave_If_body(self, node: cst.If) -> None:
        self._guards[-1].pop()

    def visit_If_orelse(self, node: cst.If) -> None:
        self._guards[-1].append(Guard(node, True))

    def leave_If_orelse(self, node: cst.If) -> None:
        self._guards[-1].pop()

    # facts -----------------------------------------------------------------
    def _grad_ref(self, expr: cst.BaseExpression, reference: cst.BaseExpression, qualified: frozenset[str]) -> None:
        mode = next((names.GRAD_MODE_NAMES[q] for q in qualified if q in names.GRAD_MODE_NAMES), None)
        if mode is None:
            return
        role, owner = self._roles.get(id(expr), ("object", None))
        enabled = names.enables_mode(expr) if isinstance(expr, cst.Call) else True
        line, col = self._pos(expr)
        self._fn.grad_refs.append(
            GradModeRef(mode, expr, reference, enabled, role, self._fn, self._frame(), line, col, owner)
        )

    def visit_Call(self, node: cst.Call) -> None:
        self._not_references.add(id(node.func))
        if names.callee_name(node) == "enter_context" and node.args:
            self._roles[id(node.args[0].value)] = ("enter_context", node)
        qualified = self._qualified(node)
        line, col = self._pos(node)
        receiver = names.dotted(node.func.value) if isinstance(node.func, cst.Attribute) else None
        self._fn.calls.append(
            CallSite(node, self._fn, self._frame(), line, col, names.callee_name(node), receiver, qualified)
        )
        if qualified:
            self._grad_ref(node, node.func, qualified)

    def _bare_reference(self, node: Union[cst.Name, cst.Attribute]) -> None:
        if id(node) in self._not_references:
            return
        leaf = names.leaf_name(node)
        if leaf in ("inference_mode", "no_grad") or (leaf in self._aliases and leaf not in _RESOLVED_LEAVES):
            qualified = self._qualified(node)
            if qualified:
                self._grad_ref(node, node, qualified)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._not_references.add(id(node.attr))
        self._bare_reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._bare_reference(node)

    def _assign(self, node: Union[cst.Assign, cst.AnnAssign, cst.AugAssign], targets: Sequence[cst.BaseExpression],
                value: Optional[cst.BaseExpression]) -> None:
        line, col = self._pos(node)
        self._fn.assigns.append(AssignFact(node, tuple(targets), value, self._fn, self._frame(), line, col))

    def visit_Assign(self, node: cst.Assign) -> None:
        self._assign(node, [t.target for t in node.targets], node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._assign(node, [node.target], node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._assign(node, [node.target], node.value)

    def visit_Return(self, node: cst.Return) -> None:
        line, col = self._pos(node)
        self._fn.returns.append(ReturnFact(node, node.value, self._fn, self._frame(), line, col))

    def visit_Yield(self, node: cst.Yield) -> None:
        line, col = self._pos(node)
        value = node.value if isinstance(node.value, cst.BaseExpression) else None
        self._fn.returns.append(ReturnFact(node, value, self._fn, self._frame(), line, col))


def build_index(wrapper: MetadataWrapper, path: str = "<string>") -> ModuleIndex:
    indexer = _Indexer(wrapper.module, path)
    wrapper.visit(indexer)
    return ModuleIndex(
        wrapper.module, path, indexer.top, indexer.functions, indexer.classes, indexer.with_statements
    )
