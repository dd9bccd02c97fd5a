"""Phases from roots: which code runs in warmup/autotune/capture, which serves, which is shared.

Warm roots are functions whose name matches ``path-patterns``, functions of files matching
``module-globs``, and, whatever their name, functions that enter ``torch.cuda.graph(...)``, call
``capture_begin()`` or enter FlashInfer's ``autotune(...)``. A ``capture-patterns`` name
(``*capture*``) is a root only where graph or autotune use confirms it: in the function, in what
it calls, or in its class, or where its class matches ``class-patterns``. Serving roots are
``serving-patterns`` names and functions that replay a captured graph. A function's phase is the
set of root kinds that reach it; warm reach stops at serving roots and serving reach at warm
roots (serving that lazily runs warmup still runs warmup). Rules fire on warm-only code.

Which grad mode each function runs under is ``lints.gradmodes``'s; the serving grad mode is the
analysis's (``lints.analysis``).
"""
from __future__ import annotations

import functools
from collections import deque
from typing import NamedTuple, Optional

from . import names
from .callgraph import CallGraph
from .globs import name_match, path_match, relative_to
from .options import LOADING_PATTERNS, Config
from .project import Project
from .regions import INFERENCE, Regions
from .summary_records import MODULE_SCOPE, callee_leaf, enclosing_withs
from .symbols import EXTERNAL

WARM, SERVING, ENTRY = "warm", "serving", "entry"
# Calls that do no work a grad mode matters to: a warm-named function making only these (arithmetic over
# floats, list building) is not warm.
_NO_WORK_CALLS = frozenset({"abs", "min", "max", "len", "range", "int", "float", "round", "sum", "list", "dict",
                            "tuple", "set", "isinstance", "print", "sorted", "enumerate", "zip", "str", "bool",
                            "append", "extend", "items", "keys", "values", "get", "format", "join", "split"})
_NO_WORK_MODULES = ("math.", "logger.", "logging.", "log.", "time.", "os.")


class Root(NamedTuple):
    kind: str
    why: str
    loading: bool = False  # model loading: weights are made there under no_grad by design
    capture: bool = False  # captures a CUDA graph or autotunes (seen in the code, not only named so)


class Reach(NamedTuple):
    """How a function is reached: from which function, at which line (None for a root)."""

    parent: Optional[str]
    line: int


class Region(NamedTuple):
    """An inference-mode region: a with block or a decorator."""

    fid: str  # the function holding the region
    line: int  # where the mode is switched on
    via: str


def module_matches(path: str, config: Config) -> Optional[str]:
    return path_match(relative_to(path, config.root), config.module_globs)


class Phases:
    def __init__(self, project: Project, graph: CallGraph, regions: Regions, config: Config) -> None:
        self.project = project
        self.graph = graph
        self.regions = regions
        self.config = config
        self.roots: dict[str, Root] = {}
        self.serving_roots: dict[str, Root] = {}
        self._semantic: dict[str, Optional[str]] = {}
        self._find_roots()
        self.warm = self._reach(self.roots, self.serving_roots)
        self.serving = self._reach(self.serving_roots, self.roots)
        # what an entry point that is no warm root reaches (a library's API, a benchmark, a driver's main)
        # before warm code: shared with warm code whatever its name, as serving code is
        callers = graph.callers()
        entries = {fid: Root(ENTRY, "no project code calls it") for fid in project.functions
                   if fid not in callers and fid not in self.roots and fid not in self.serving_roots
                   and not project.is_library(fid)}
        self.entry_reach = self._reach(entries, self.roots)
        self._warm_roots: dict[str, str] = {}

    # roots ---------------------------------------------------------------------------
    def semantic_use(self, fid: str) -> Optional[str]:
        """Why ``fid`` captures a CUDA graph or autotunes, from what it calls (not from its name)."""
        if fid in self._semantic:
            return self._semantic[fid]
        found = None
        fn = self.project.function(fid)
        calls = fn["calls"]
        for index in fn["notable"]:
            call = calls[index]
            func = call.func
            if func[0] != "n" or (leaf := callee_leaf(func)) not in names.SEMANTIC_LEAVES:
                continue
            if leaf == "capture_begin":
                found = f"calls `{func[1]}()` at line {call.line}"
                break
            symbol = self.project.resolve(fid, func[1])
            if symbol is None or symbol.kind != EXTERNAL:
                continue
            if symbol.target in names.GRAPH_CAPTURE_NAMES:
                found = f"captures a CUDA graph (`{func[1]}(...)` at line {call.line})"
                break
            if names.is_autotune(symbol.target):
                found = f"enters `{symbol.target}(...)` at line {call.line}"
                break
        self._semantic[fid] = found
        return found

    def is_context_factory(self, fid: str) -> bool:
        """A helper that only builds a context (a @contextmanager, or one returning a grad-mode switch or an
        autotune context): calling it runs no warm code; its caller's block runs under the context."""
        if self.regions.is_context_manager(fid) or self.regions.returns(fid):
            return True
        fn = self.project.function(fid)
        for ret in fn["rets"]:
            value = ret.value
            if value[0] == "c":
                func = fn["calls"][value[1]].func
                if func[0] == "n":
                    symbol = self.project.resolve(fid, func[1])
                    if symbol is not None and symbol.kind == EXTERNAL and names.is_autotune(symbol.target):
                        return True
        return False

    def _replays(self, fn: dict) -> Optional[int]:
        calls = fn["calls"]
        for index in fn["notable"]:
            call = calls[index]
            func = call.func
            if func[0] == "n" and func[1].endswith("." + names.REPLAY_LEAF) and "graph" in func[1].lower():
                return call.line
        return None

    def _confirmed(self, fid: str) -> Optional[str]:
        """Graph or autotune use that confirms a capture-pattern name."""
        seen = {fid}
        queue = deque([(fid, 0)])
        while queue:
            current, depth = queue.popleft()
            use = self.semantic_use(current)
            if use:
                return use if current == fid else f"{self.project.label(current)} {use}"
            if depth < 3:
                for edge in self.graph.edges(current):
                    if edge.callee not in seen:
                        seen.add(edge.callee)
                        queue.append((edge.callee, depth + 1))
        cid = self.project.class_of(fid)
        if cid is not None:
            cls = self.project.classes[cid][1]
            if (pattern := name_match(cls["name"], self.config.class_patterns)) is not None:
                return f"method of `{cls['name']}` (matches `{pattern}`)"
            for klass in self.project.mro(cid):
                summary, info = self.project.classes[klass]
                for method in info["methods"]:
                    method_fid = f"{summary['module']}:{info['qual']}.{method}"
                    if method_fid in self.project.functions and (use := self.semantic_use(method_fid)):
                        return f"its class's `{method}()` {use}"
        return None

    def _find_roots(self) -> None:
        config = self.config
        serving_patterns = tuple(config.serving_patterns)
        path_patterns = tuple(config.path_patterns)
        capture_patterns = tuple(config.capture_patterns)
        by_name: dict[str, tuple] = {}  # 34k functions on a 1M-line tree, a third as many names
        module_globs = {path: module_matches(path, config) for path in self.project.by_path}
        candidates = []  # capture-pattern names, confirmed once every other root is known
        for fid, (summary, fn) in self.project.functions.items():
            name = fn["name"]
            if name == MODULE_SCOPE or summary.get("library"):  # an installed library's names are not phases
                continue
            if (glob := module_globs[summary["path"]]) is not None:
                self.roots[fid] = Root(WARM, f"module matches `{glob}`")
                continue
            matched = by_name.get(name)
            if matched is None:
                matched = by_name[name] = (name_match(name, serving_patterns), name_match(name, path_patterns),
                                           name_match(name, capture_patterns))
            serving, warm, capture = matched
            if serving is not None:
                self.serving_roots[fid] = Root(SERVING, f"name `{name}` matches serving pattern `{serving}`")
                continue
            if (line := self._replays(fn)) is not None:
                self.serving_roots[fid] = Root(SERVING, f"replays a CUDA graph at line {line}")
                continue
            if warm is not None and self._does_work(fid):
                self.roots[fid] = Root(WARM, f"name `{name}` matches `{warm}`", warm in LOADING_PATTERNS)
            elif (use := self.semantic_use(fid)) is not None:
                self.roots[fid] = Root(WARM, use, capture=True)
            elif capture is not None:
                candidates.append((fid, name, capture))
        for fid, name, pattern in candidates:
            confirmed = self._confirmed(fid)
            if confirmed:
                self.roots[fid] = Root(WARM, f"name `{name}` matches `{pattern}` and {confirmed}", capture=True)

    def _does_work(self, fid: str, depth: int = 3) -> bool:
        """Whether ``fid`` or what it calls (a few levels down) makes a call that is not arithmetic, list
        building or logging: a model, a kernel, a tensor, an object of the project's."""
        seen = {fid}
        queue = deque([(fid, 0)])
        while queue:
            current, level = queue.popleft()
            fn = self.project.function(current)
            for call in fn["calls"]:
                func = call.func
                if func[0] != "n" or (callee_leaf(func) not in _NO_WORK_CALLS
                                      and not func[1].startswith(_NO_WORK_MODULES)):
                    return True
            if level < depth:
                for edge in self.graph.edges(current):
                    if edge.callee not in seen:
                        seen.add(edge.callee)
                        queue.append((edge.callee, level + 1))
        return False

    def _reach(self, roots: dict[str, Root], stops: dict[str, Root]) -> dict[str, Reach]:
        reach = {fid: Reach(None, 0) for fid in roots}
        queue = deque(sorted(roots))
        while queue:
            fid = queue.popleft()
            for edge in self.graph.edges(fid):
                if edge.callee not in reach and edge.callee not in stops:
                    reach[edge.callee] = Reach(fid, edge.line)
                    queue.append(edge.callee)
        return reach

    # phases --------------------------------------------------------------------------
    def is_warm_only(self, fid: str) -> bool:
        return fid in self.warm and fid not in self.serving and fid not in self.entry_reach

    def is_warm(self, fid: str) -> bool:
        return fid in self.warm

    def why_warm(self, fid: str) -> str:
        """`name matches ...` for a root, else the first call of the chain from the root that reaches it."""
        step = self.warm[fid]
        if step.parent is None:
            return self.roots[fid].why
        root = self._warm_root(fid)
        return (f"called from {self.project.label(step.parent)} at {self.project.where(step.parent, step.line)}"
                f" (reached from {self.project.label(root)}: {self.roots[root].why})")

    def _warm_root(self, fid: str) -> str:
        """The root whose call chain reaches ``fid``; memoised along the chain (one finding per link
        of a long chain would otherwise walk it again each time: quadratic)."""
        chain = []
        current = fid
        while current not in self._warm_roots and self.warm[current].parent is not None:
            chain.append(current)
            current = self.warm[current].parent  # the search reached a parent first: no cycles
        root = self._warm_roots.get(current, current)
        for link in chain:
            self._warm_roots[link] = root
        return root

    def is_loading_only(self, fid: str) -> bool:
        """Reached from model loading alone (its root, down the first chain found)."""
        return fid in self.warm and self.roots[self._warm_root(fid)].loading

    def reaches_warm(self, fid: str, depth: int = 4) -> Optional[str]:
        """A warm root that ``fid`` runs (itself included), following calls a few levels down."""
        seen = {fid}
        queue = deque([(fid, 0)])
        while queue:
            current, level = queue.popleft()
            if current in self.roots:
                return current
            if level < depth:
                for edge in self.graph.edges(current):
                    if edge.callee not in seen and edge.callee not in self.serving_roots:
                        seen.add(edge.callee)
                        queue.append((edge.callee, level + 1))
        return None

    # inference-mode reach -------------------------------------------------------------
    @functools.cached_property
    def _inference_regions(self) -> list[tuple[str, int, Region]]:
        out = []
        for fid, (_summary, fn) in self.project.functions.items():
            for index, record in enumerate(fn["withs"]):
                for modes in self.regions.with_modes(fid, index):
                    chosen = next((m for m in modes if m.mode == INFERENCE), None)
                    if chosen is not None:
                        out.append((fid, index, Region(fid, record.line, chosen.via)))
                        break
            if fn["dec"]:
                for mode, dec in self.regions.decorator_modes(fid):
                    if mode.mode == INFERENCE:
                        out.append((fid, -1, Region(fid, dec.line, f"@{mode.via.strip('`')}")))
                        break
        return out

    def inference_regions(self) -> list[tuple[str, int, Region]]:
        """(function, with index or -1 for a decorator, region) of every inference-mode region."""
        return list(self._inference_regions)

    @staticmethod
    def _inside(fn: dict, with_index: int, region: int) -> bool:
        return region in enclosing_withs(fn, with_index)
