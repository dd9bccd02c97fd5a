"""Lazily allocated reusable buffers, where they flow, and where they are updated in place.

``buffer_allocations`` finds where new tensors are kept, ``buffer_flow`` where they flow; this module finds
every in-place torch update anywhere a buffer flows to (``.fill_()``, ``+=``, ``buf[a:b] = x``, ``out=buf``),
directly or through a parameter of a function that updates it, which is where the crash shows. Kernels that
write through pointers (Triton, CUDA, JIT) never raise, so their arguments are not updates.
"""
from __future__ import annotations

import functools
from typing import NamedTuple, Optional

from . import names
from .buffer_allocations import Allocation, BufferKey
from .buffer_flow import MODULE_BUFFER_VIEWS, SAME_ITEMS, BufferFlow
from .field_rebinds import FieldRebinds
from .provenance import COPYING_METHODS
from .regions import ENABLE_GRAD, INFERENCE_OFF, NO_GRAD
from .summary_records import binding_may_reach, callee_leaf, enclosing_guards, enclosing_withs, method_call
from .symbols import CLASS, EXTERNAL, FIELD, FUNC, GLOBAL, LOCAL

__all__ = ["Allocation", "BufferKey", "Buffers", "Mutation"]


class Mutation(NamedTuple):
    fid: str
    line: int
    col: int
    with_index: int
    guard: int
    how: str
    # where the buffer is handed to the function that updates it (a parameter of it, or of what it calls):
    # the grad mode there is the update's
    entry_fid: str = ""
    entry_with: int = -1
    entry_line: int = 0
    # made through the module's `named_buffers()` (`dict(model.named_buffers())[name][...] = t`): the buffers
    # a parameter stands for are the registered ones of the module passed for it
    of_module_buffers: bool = False


# Values a name bound to holds other objects in, or is new: never a kept tensor itself (a tuple or
# comprehension, an operator's result, a constant).
_HOLDERS = frozenset("tmfk")


class Buffers(BufferFlow):
    """A project's kept buffers (``allocations``), where they flow (``keys_of``) and are updated (``mutations``)."""

    @functools.cached_property
    def rebinds(self) -> FieldRebinds:
        return FieldRebinds(self.project, self.graph, self.provenance, self.matches, self._always_new_tensor)

    # mutations -----------------------------------------------------------------------
    def _sites(self, fid: str):
        """(receiver expression, mutation) for each in-place update in ``fid``."""
        fn = self.project.function(fid)
        calls = fn["calls"]
        for index in fn["notable"]:  # in-place updates and `out=` among them
            call = calls[index]
            func = call.func
            if func[0] == "n" and "." not in func[1] or not names.is_inplace_method(callee_leaf(func)):
                receiver = None  # the common case, told without building the receiver
            else:
                receiver, method = method_call(func)
            if receiver is not None:
                yield receiver, Mutation(fid, call.line, call.col, call.with_index, call.guard,
                                         f"`.{method}()`"), False
            if receiver is not None and func[0] == "n" and call.args:
                function = self.project.resolve(fid, func[1])  # the function form: `torch.clamp_(b, 0, 1)`
                if (function is not None and function.kind == EXTERNAL
                        and function.target.rpartition(".")[0] in names.INPLACE_FUNCTION_MODULES):
                    yield call.args[0], Mutation(fid, call.line, call.col, call.with_index, call.guard,
                                                    f"`{func[1]}()`"), False
            out = call.kwargs.get("out")
            if out is not None and func[0] == "n" and func[1].split(".", 1)[0] in ("torch", "th"):
                yield out, Mutation(fid, call.line, call.col, call.with_index, call.guard,
                                    "`out=` argument"), False
        for fact in fn["assigns"]:
            op = fact.op
            target = fact.target
            if op is not None and op != "with":
                yield target, Mutation(fid, fact.line, fact.col, fact.with_index, fact.guard,
                                       f"augmented assignment ({_OPERATORS.get(op, op)})"), False
            elif op is None and target[0] == "s":
                yield target, Mutation(fid, fact.line, fact.col, fact.with_index, fact.guard,
                                       "slice/index assignment"), True

    def _is_container(self, fid: str, expr: list, depth: int = 0) -> bool:
        """Whether ``expr`` is a dict cache itself (``self._cache``, a global, a local bound only to one of
        them), not a tensor taken out of one (``out = pool.get(n)``; ``out[:] = x`` writes that tensor)."""
        if expr[0] != "n" or depth > 4:
            return False
        symbol = self.project.resolve(fid, expr[1])
        if symbol is None:
            return False
        if symbol.kind in (FIELD, GLOBAL):
            return "." not in symbol.name
        if symbol.kind == LOCAL and "." not in symbol.name:
            values = self.project.local_values(symbol.owner).get(symbol.name, [])
            return bool(values) and all(self._is_container(symbol.owner, v, depth + 1) for v in values)
        return False

    def _replaced_before(self, fid: str, fn: dict, name: str, mutation: Mutation) -> Optional[tuple[int, int]]:
        """Where ``name = <a new tensor>`` last comes before ``mutation`` and runs whenever it does:
        ``out = out.clone()``, ``self.h = torch.roll(self.h, 1)``, ``out = out + x``. What ``name`` held
        before is not what the mutation updates. None if there is none. A rebinding to anything else may
        be an alternative (try/except, a loop) and is not taken as one. ``name`` may be an attribute
        (``self.h``): a call between the two could rebind it, which is not followed."""
        chain = set(enclosing_guards(fn, mutation.guard))
        found = None
        for fact in fn["assigns"]:
            where = (fact.line, fact.col)
            # a statement of its own in the very block of the update (a copy in a loop, a `try`, a handler,
            # a match case, another with-body or a walrus may not run, or run under another mode): indented
            # as the update is, nothing between them indented less
            if (fact.target == ["n", name] and fact.op is None and where < (mutation.line, mutation.col)
                    and fact.col == mutation.col and (fact.guard < 0 or fact.guard in chain)
                    and all(first <= mutation.line <= last for first, last in fn["blocks"]
                            if first <= fact.line <= last)
                    and self._fresh_tensor(fid, fact.value)
                    and self._mode_kept(fid, fn, fact.with_index, mutation.with_index)
                    and not _dedented_between(fn, fact.line, mutation.line, mutation.col)):
                found = max(found or where, where)
        # bound again after the copy (`out, k = get_buf(), 0`, a loop, a with), itself or what it is an
        # attribute of (`st.h = st.h.clone(); st = other`): not known
        prefixes = [["n", name.rsplit(".", depth)[0]] for depth in range(name.count(".") + 1)]
        if found is not None and any(f.target in prefixes and (f.line, f.col) > found
                                     for f in fn["assigns"]):
            return None
        return found

    def _local_keys_reaching(self, fid: str, fn: dict, local: list, guard: int, line: int, col: int
                             ) -> Optional[frozenset[BufferKey]]:
        """The buffers the local ``local`` (``["n", name]``) may hold where it is used (an update of it or of a view
        of it, an argument) at ``line``, ``col`` under ``guard``, where some of its bindings cannot reach there
        (``summary_records.binding_may_reach``: ``g = cache_a()`` in an if's body, ``g = cache_b()`` in its else
        or in a later if). None where every binding may reach it, and for a use in a lambda or a comprehension
        (it may run after any of them)."""
        bound = [fact for fact in fn["assigns"] if fact.target == local]  # as ``Project.local_values`` has them
        reaching = [fact for fact in bound if binding_may_reach(fn, (fact.guard, fact.line), (guard, line))]
        if len(reaching) == len(bound):
            return None
        calls = fn["calls"]
        if any((calls[index].line, calls[index].col) == (line, col) for index in fn["deferred"]):
            return None
        symbol = self.project.resolve(fid, local[1])
        if symbol is None or symbol.kind != LOCAL or symbol.owner != fid:
            return None
        return frozenset().union(*(self.keys_of(fid, fact.value) for fact in reaching))

    def _mode_kept(self, fid: str, fn: dict, copy_with: int, update_with: int) -> bool:
        """Whether the copy is no inference tensor the update cannot write: each with around the copy but
        not the update is known to keep inference mode off (``torch.no_grad()``, another context of
        torch's; not a lock, which may be anything), and none around the update but not the copy leaves it."""
        around_copy, around_update = list(enclosing_withs(fn, copy_with)), list(enclosing_withs(fn, update_with))
        for index in around_copy:
            if index not in around_update and not all(
                    all(m.mode in (NO_GRAD, ENABLE_GRAD, INFERENCE_OFF) for m in modes) if modes
                    else self._torch_context(fid, fn, item.expr)
                    for modes, item in zip(self.regions.with_modes(fid, index), fn["withs"][index].items)):
                return False
        return not any(m.mode == INFERENCE_OFF for index in around_update if index not in around_copy
                       for modes in self.regions.with_modes(fid, index) for m in modes)

    def _torch_context(self, fid: str, fn: dict, expr: list) -> bool:
        """A context of torch's that is no grad-mode switch (``torch.autocast(...)``, ``torch.cuda.stream(s)``,
        ``torch.profiler.record_function(...)``): it cannot enter inference mode."""
        if expr[0] != "c":
            return False
        func = fn["calls"][expr[1]].func
        symbol = self.project.resolve(fid, func[1]) if func[0] == "n" else None
        return (symbol is not None and symbol.kind == EXTERNAL and symbol.target.startswith("torch.")
                and symbol.target not in names.GRAD_MODE_CLASSES and symbol.target != names.C_INFERENCE_MODE)

    def _fresh_tensor(self, fid: str, value: list) -> bool:
        """Whether ``value`` is always a new object that holds no buffer: an operator's result (the
        summary's ``["f"]``), a copy (``b.clone()``, ``torch.roll(b, 1)``, ``torch.cat(...)``) or a
        factory's tensor; not ``b.detach()``, ``b.reshape(...)``, ``b.to(...)`` (they may share ``b``),
        nor a method of ours of a copy's name that hands out a buffer (``ring.roll(4)``)."""
        if value == ["f"]:
            return True
        if value[0] != "c":
            return False
        func = self.project.function(fid)["calls"][value[1]].func
        if func[0] == "n":
            symbol = self.project.resolve(fid, func[1])
            if symbol is not None and symbol.kind == EXTERNAL and symbol.target in names.FRESH_TENSOR_FUNCTIONS:
                return True
            if symbol is None or symbol.kind in (FUNC, CLASS, EXTERNAL):
                return False  # a function of the project, or another library's: not known to copy
        receiver, method = method_call(func)
        # a method of ours of that name (`ring.roll()`) counts only where none of them hands out a buffer
        return receiver is not None and method in names.FRESH_TENSOR_METHODS and not any(
            self.returned(target) for target in self.project.methods_named(method))

    def _always_new_tensor(self, fid: str, value: list) -> bool:
        """Whether ``value`` is always a new tensor that holds no buffer: ``_fresh_tensor``'s, or a view or copy
        of one (``torch.zeros(n).to(device)``); not ``torch.zeros(n) if c else self.ws``."""
        calls = self.project.function(fid)["calls"]
        for _depth in range(8):
            if self._fresh_tensor(fid, value):
                return True
            if value[0] != "c":
                return False
            receiver, method = method_call(calls[value[1]].func)
            if receiver is None or method not in names.VIEW_METHODS and method not in COPYING_METHODS:
                return False
            value = receiver
        return False

    def _is_kernel(self, fid: str) -> bool:
        return any(names.is_kernel_decorator(target) for target in self._decorators(fid))

    def mutations(self) -> dict[BufferKey, list[Mutation]]:
        """Every in-place update of a buffer that has a lazy allocation, by buffer."""
        wanted_names = {a.key.name.rsplit(".", 1)[-1] for a in self.allocations}
        dict_caches: dict[tuple[str, str], list[BufferKey]] = {}  # by (kind, name): a subclass's is the same place
        for alloc in self.allocations:
            if alloc.dict_cache:
                dict_caches.setdefault((alloc.key.kind, alloc.key.name), []).append(alloc.key)
        out: dict[BufferKey, list[Mutation]] = {}
        param_writers: dict[str, list[tuple[str, Mutation]]] = {}
        for fid, (_summary, fn) in self.project.functions.items():
            if fn["dec"] and self._is_kernel(fid):  # most functions have no decorator: no call
                continue
            params = set(fn["params"])
            for receiver, mutation, is_store in self._sites(fid):
                base = receiver
                depth = 0
                through_buffers = False
                while base[0] == "s" or (base[0] == "c" and depth < 4):
                    if base[0] == "c":
                        call = fn["calls"][base[1]]
                        viewed, method = method_call(call.func)
                        if viewed is not None and method in MODULE_BUFFER_VIEWS:
                            base, through_buffers = viewed, True
                        elif call.func[0] == "n" and call.func[1] in SAME_ITEMS and call.args:
                            base = call.args[0]
                        elif viewed is None or method not in names.VIEW_METHODS:
                            break
                        else:
                            base = viewed
                    else:
                        base = base[1]
                    depth += 1
                text = base[1] if base[0] == "n" else (base[2] if base[0] == "a" else "")
                leaf = text.rsplit(".", 1)[-1]
                head = text.split(".", 1)[0]
                replaced = self._replaced_before(fid, fn, text, mutation) if base[0] == "n" else None
                if head in params and head not in ("self", "cls") and replaced is None:
                    # `out.fill_()`, `ws.idx[:n] = x`, `dict(model.named_buffers())[k][:] = x`
                    param_writers.setdefault(fid, []).append(
                        (head, mutation._replace(of_module_buffers=True) if through_buffers else mutation))
                # the receiver must mention a buffer's name, or be a local/call that may hold one
                if base[0] == "n" and "." in text and head in ("self", "cls") and \
                        wanted_names.isdisjoint(text.split(".")[1:]):
                    continue
                if replaced is not None:  # `out = out.clone()` or `out = out + x`, then `out.fill_()`
                    keys = frozenset().union(*(self.keys_of(fid, fact.value) for fact in fn["assigns"]
                                               if fact.target == ["n", text] and fact.op is None
                                               and (fact.line, fact.col) > replaced))
                elif receiver[0] == "n" and "." not in text and mutation.how.startswith("augmented"):
                    # `x += y` on a local writes the tensor it is bound to; bound to a tuple, a list, a number
                    # or an operator's result (`offset = 0`, `tensors = head + (w,)`), it rebinds the name
                    keys = frozenset().union(*(self.keys_of(fid, fact.value) for fact in fn["assigns"]
                                               if fact.target == receiver and fact.op is None
                                               and fact.value[0] not in _HOLDERS))
                else:
                    keys = self._local_keys_reaching(fid, fn, base, mutation.guard, mutation.line, mutation.col) \
                        if base[0] == "n" and "." not in text and not through_buffers else None
                    if keys is None:
                        keys = self.keys_of(fid, receiver)
                # a field of a kept object (`ws.count += 1`, `self._ws.table[k] = v`) may be an int or a dict: only
                # a torch method (`ws.topk_idx[n:].fill_(-1)`) or `out=` says that it is a tensor
                field_write = is_store or mutation.how.startswith("augmented")
                for key in keys:
                    if field_write and "." in text and key.name.rsplit(".", 1)[-1] != leaf:
                        continue
                    if key.kind == "attr" and replaced is None and base == ["n", "self." + key.name] \
                            and self.rebinds.behind_binding(fid, key):
                        continue  # writes the tensor a caller bound just before (`run_kernel()`, then `validate()`)
                    if is_store and receiver[0] == "s" and any(
                            self.matches(cache, key) for cache in dict_caches.get((key.kind, key.name), ())) \
                            and self._is_container(fid, receiver[1]):
                        continue  # `self._cache[k] = buf` inserts into the cache, it writes no tensor
                    out.setdefault(key, []).append(mutation)
        self._mutations_through_params(out, self._writers_up_the_calls(param_writers))
        return out

    def _writers_up_the_calls(self, writers: dict[str, list[tuple[str, Mutation]]]
                              ) -> dict[str, list[tuple[str, Mutation]]]:
        """Each function's parameters that it, or a function it hands them to, updates in place
        (``def stage(t, ws): fused(ws.topk_idx)`` and ``def fused(out): out[n:].fill_(-1)``), joined over the
        call graph from the updating functions up to their callers, once per (function, parameter, update)."""
        callers = self.graph.callers()
        seen = {(fid, param, m) for fid, found in writers.items() for param, m in found}
        handed_up: dict[str, int] = {}  # function -> how many of its writers were handed to its callers
        queue = list(writers)
        while queue:
            callee = queue.pop()
            start = handed_up.get(callee, 0)
            fresh = writers[callee][start:]  # the earlier ones reached every caller already
            if not fresh:
                continue
            handed_up[callee] = start + len(fresh)
            # a call of a base class's method may run this override (`kernel.stage_inputs(...)`)
            edges = [e for fid in (callee, *self.project.overridden(callee)) for e in callers.get(fid, ())]
            for edge in edges:
                if edge.call < 0 or edge.how == "argument" or self._is_kernel(edge.caller):
                    continue
                fn = self.project.function(edge.caller)
                params = set(fn["params"]) - {"self", "cls"}
                call = fn["calls"][edge.call]
                declared = self.project.function(edge.callee)["params"]
                heads: dict[str, str] = {}  # parameter -> the caller's name passed for it
                for param, mutation in fresh:
                    head = heads.get(param)
                    if head is None:
                        arg = self.regions.argument_for(edge.callee if param in declared else callee, param, call)
                        head = heads[param] = _base_name(fn, arg).split(".", 1)[0] if arg is not None else ""
                    if head in params and (edge.caller, head, mutation) not in seen:
                        seen.add((edge.caller, head, mutation))
                        if edge.caller not in writers:
                            writers[edge.caller] = []
                        writers[edge.caller].append((head, mutation))
                        queue.append(edge.caller)
        return writers

    def _mutations_through_params(self, out: dict[BufferKey, list[Mutation]],
                                  writers: dict[str, list[tuple[str, Mutation]]]) -> None:
        """``def scatter(out): out.copy_(x)`` called with a buffer (or with an object holding one): an update
        of that buffer, in the grad mode of the call that hands it over."""
        if not writers:
            return
        leaves = {self.project.function(fid)["name"] for fid in writers}
        for fid, (_summary, fn) in self.project.functions.items():
            for index, call in enumerate(fn["calls"]):
                func = call.func
                if func[0] != "n" or callee_leaf(func) not in leaves:
                    continue
                targets: dict[str, None] = {}  # in order, each once: the updates' order shows in the findings
                for base in self.graph.call_targets(fid, index):
                    targets[base] = None
                    for target in self.provenance.overrides(base):
                        targets[target] = None
                for target in targets:
                    for param, mutation in writers.get(target, []):
                        arg = self.regions.argument_for(target, param, call)
                        if arg is None:
                            continue
                        keys = self._registered_keys(fid, arg) if mutation.of_module_buffers else None
                        if keys is None and arg[0] == "n" and "." not in arg[1]:
                            keys = self._local_keys_reaching(fid, fn, arg, call.guard, call.line, call.col)
                        if keys is None:
                            keys = self.keys_of(fid, arg)
                        for key in keys:
                            how = mutation.how if mutation.entry_fid else \
                                f"{mutation.how} on parameter `{param}` of {self.project.label(target)}"
                            out.setdefault(key, []).append(mutation._replace(
                                how=f"{how}, passed at {self.project.where(fid, call.line)}",
                                entry_fid=fid, entry_with=call.with_index, entry_line=call.line))

    def matches(self, alloc_key: BufferKey, key: BufferKey) -> bool:
        if alloc_key == key:
            return True
        if alloc_key.kind == key.kind == "attr" and alloc_key.name == key.name \
                and alloc_key.owner in self.project.classes and key.owner in self.project.classes:
            return alloc_key.owner in self.project.mro(key.owner) or key.owner in self.project.mro(alloc_key.owner)
        return False


def _base_name(fn: dict, expr: list) -> str:
    """The dotted name an argument is a view, slice or field of (``ws.topk_idx[:n].view(-1)``), or ""."""
    for _ in range(6):
        if expr[0] == "s":
            expr = expr[1]
        elif expr[0] == "c":
            receiver, method = method_call(fn["calls"][expr[1]].func)
            if receiver is None or method not in names.VIEW_METHODS:
                return ""
            expr = receiver
        else:
            break
    return expr[1] if expr[0] == "n" else ""


def _dedented_between(fn: dict, first: int, last: int, col: int) -> bool:
    """Whether a call or assignment on a line between ``first`` and ``last`` starts left of ``col``."""
    return any(first < call.line < last and call.col < col for call in fn["calls"]) or any(
        first < fact.line < last and fact.col < col for fact in fn["assigns"])


_OPERATORS = {"Add": "+=", "Sub": "-=", "Mult": "*=", "Div": "/=", "FloorDiv": "//=", "Mod": "%=", "Pow": "**=",
              "BitAnd": "&=", "BitOr": "|=", "BitXor": "^=", "LShift": "<<=", "RShift": ">>=", "MatMult": "@="}
