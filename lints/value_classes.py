"""What class a value is: the project class of ``self.field``, of what a call builds or returns, of a
module global bound once to an instance.

``ValueClasses`` is a part of ``lints.project.Project``: it reads the index through the project's
``functions``, ``classes``, ``function``, ``resolve``, ``resolve_global``, ``mro``, ``method``,
``local_values`` and ``_rebound_names``.
"""
from __future__ import annotations

from typing import Optional

from . import names
from .summary_records import MODULE_SCOPE, method_call
from .symbols import CLASS, EXTERNAL, FUNC, INSTANCE, Symbol, fid_of


class ValueClasses:
    """The receiver-type half of ``Project``: memoised on the project, computed on demand."""

    def _init_value_classes(self) -> None:
        self._field_types: dict[str, dict[str, str]] = {}
        self._returned_classes: dict[str, Optional[str]] = {}
        self._field_aliases: dict[str, dict[str, list[Optional[Symbol]]]] = {}
        self._attribute_bindings: Optional[dict[str, int]] = None
        self._collecting = 0  # collections of a class's fields, aliases or bases under way: what they see is partial

    def field_type(self, cid: str, field: str) -> Optional[str]:
        """The class of ``self.field``, from ``self.field = Cls(...)``, a typed parameter or an annotation."""
        for klass in self.mro(cid):
            types = self._field_types.get(klass)
            if types is None:
                self._field_types[klass] = {}  # guards `self.model = self.model.to(device)`
                self._collecting += 1
                try:
                    types = self._field_types[klass] = self._collect_field_types(klass)
                finally:
                    self._collecting -= 1
            if field in types:
                return types[field]
        return None

    def field_alias(self, cid: str, field: str) -> Optional[Symbol]:
        """What ``self.field`` stands for where the class (with its bases) binds it once, in a method,
        to a name that resolves outside the project (``self.ctx = torch.inference_mode``)."""
        found: list[Optional[Symbol]] = []
        for klass in self.mro(cid):
            aliases = self._field_aliases.get(klass)
            if aliases is None:
                self._field_aliases[klass] = {}  # guards cycles
                self._collecting += 1
                try:
                    aliases = self._field_aliases[klass] = self._collect_field_aliases(klass)
                finally:
                    self._collecting -= 1
            found.extend(aliases.get(field, ()))
        if len(found) != 1 or found[0] is None or self._attribute_bound_elsewhere(field) > 1:
            return None
        return found[0]

    def _attribute_bound_elsewhere(self, field: str) -> int:
        """How many times the project binds an attribute named ``field`` (``x.field = ...`` anywhere,
        ``setattr(x, "field", ...)``): past one, a field alias may be rebound (a subclass, a caller)."""
        if self._attribute_bindings is None:
            counts: dict[str, int] = {}
            for _summary, fn in self.functions.values():
                for fact in fn["assigns"]:
                    target = fact.target
                    leaf = target[1].rpartition(".")[2] if target[0] == "n" and "." in target[1] else (
                        target[2] if target[0] == "a" else None)
                    if leaf is not None:
                        counts[leaf] = counts.get(leaf, 0) + 1
                for call in fn["calls"]:
                    func, args = call.func, call.args
                    if func[0] == "n" and func[1] == "setattr" and len(args) > 1 and args[1][0] == "k" \
                            and isinstance(args[1][1], str):
                        counts[args[1][1]] = counts.get(args[1][1], 0) + 2  # never an alias: rebound at run time
            self._attribute_bindings = counts
        return self._attribute_bindings.get(field, 0)

    def _collect_field_aliases(self, cid: str) -> dict[str, list[Optional[Symbol]]]:
        """field -> what each ``self.field = ...`` in the class's methods binds it to (None: anything but
        an alias of something outside the project)."""
        summary, cls = self.classes[cid]
        module = summary["module"]
        out: dict[str, list[Optional[Symbol]]] = {}
        for method in cls["methods"]:
            fid = fid_of(module, f"{cls['qual']}.{method}")
            if fid not in self.functions:
                continue
            for fact in self.function(fid)["assigns"]:
                target = fact.target
                if target[0] != "n" or not target[1].startswith("self.") or target[1].count(".") != 1:
                    continue
                value = fact.value
                # only grad-mode switches: what the rules need, and few enough that checking each is cheap
                symbol = self.resolve(fid, value[1]) if (value[0] == "n" and fact.op is None and value[1]
                                                         .rpartition(".")[2] in names.SWITCH_LEAVES) else None
                out.setdefault(target[1][5:], []).append(symbol if symbol is not None and symbol.kind == EXTERNAL
                                                          and symbol.target in names.GRAD_MODE_CLASSES else None)
        return out

    def _collect_field_types(self, cid: str) -> dict[str, str]:
        summary, cls = self.classes[cid]
        types: dict[str, str] = {}
        module = summary["module"]
        scope = fid_of(module, MODULE_SCOPE)
        for field, annotation in cls.get("fields", {}).items():
            symbol = self.resolve(scope, annotation)
            if symbol is not None and symbol.kind == CLASS:
                types[field] = symbol.target
        methods = [fid for fid in (fid_of(module, f"{cls['qual']}.{m}") for m in cls["methods"])
                   if fid in self.functions]
        # how many times the class's methods bind each field: a factory counts only for a field bound once
        bound_once: dict[str, int] = {}
        for fid in methods:
            for fact in self.function(fid)["assigns"]:
                if fact.target[0] == "n":
                    bound_once[fact.target[1]] = bound_once.get(fact.target[1], 0) + 1
        for fid in methods:
            fn = self.function(fid)
            for target, annotation in fn["ann"].items():
                if target.startswith("self.") and target.count(".") == 1:
                    symbol = self.resolve(fid, annotation)
                    if symbol is not None and symbol.kind == CLASS:
                        types.setdefault(target[5:], symbol.target)
            for fact in fn["assigns"]:
                target = fact.target
                if target[0] != "n" or not target[1].startswith("self.") or target[1].count(".") != 1:
                    continue
                cls_id = self.class_of_value(fid, fact.value, factories=bound_once.get(target[1], 0) == 1)
                if cls_id is not None:
                    types.setdefault(target[1][5:], cls_id)
        return types

    def class_of_value(self, fid: str, value: list, depth: int = 0, factories: bool = False) -> Optional[str]:
        """The project class of the object ``value`` evaluates to, when the code says so; with
        ``factories``, also through a function that always builds one (``self.backend = get_backend()``).
        Not for locals: ``ws = pool.get()`` stays a local, whose fields the buffer flow follows into the
        constructor call the function returns (``Workspace(topk_idx=self._topk)``)."""
        if depth > 4:
            return None
        if value[0] == "c":
            func = self.function(fid)["calls"][value[1]].func
            receiver, method = method_call(func)
            if receiver is not None and method in names.MODULE_RETURNING_METHODS:
                # `Model(cfg).cuda()`, `self.model.to(device).eval()`: an nn.Module's own methods give it back
                cls = self.class_of_value(fid, receiver, depth + 1, factories)
                if cls is not None and self.method(cls, method) is None:
                    return cls
            if func[0] == "n":
                symbol = self.resolve(fid, func[1])
                if symbol is not None and symbol.kind == CLASS:
                    return symbol.target
                if symbol is not None and symbol.kind == FUNC:
                    declared = self.function(symbol.target).get("ret")
                    if isinstance(declared, str):  # `def create_kernel(cfg) -> KernelBackend:`
                        found = self.resolve(symbol.target, declared)
                        if found is not None and found.kind == CLASS:
                            return found.target
                # not a method: a subclass may override that
                if factories and symbol is not None and symbol.kind == FUNC and not self.function(symbol.target)["cls"]:
                    return self._returned_class(symbol.target, depth + 1)
        elif value[0] == "u":  # `a, kernel = self._prepare()`: element of a declared or displayed tuple
            return self._element_class(fid, value[1], value[2], depth + 1)
        elif value[0] == "n":
            symbol = self.resolve(fid, value[1])
            if symbol is not None and symbol.kind == INSTANCE:
                return symbol.target
        elif value[0] == "b":
            for operand in value[1]:
                found = self.class_of_value(fid, operand, depth + 1, factories)
                if found:
                    return found
        return None

    def _element_class(self, fid: str, value: list, index: int, depth: int) -> Optional[str]:
        if value[0] == "t":
            return self.class_of_value(fid, value[1][index], depth + 1) if index < len(value[1]) else None
        if value[0] != "c":
            return None
        func = self.function(fid)["calls"][value[1]].func
        symbol = self.resolve(fid, func[1]) if func[0] == "n" else None
        if symbol is None or symbol.kind != FUNC:
            return None
        target = self.function(symbol.target)
        declared = target.get("ret")
        if isinstance(declared, list) and index < len(declared) and declared[index]:
            found = self.resolve(symbol.target, declared[index])
            if found is not None and found.kind == CLASS:
                return found.target
        classes = {self._element_class(symbol.target, ret.value, index, depth + 1)
                   for ret in target["rets"] if not ret.is_yield and ret.value[0] == "t"}
        return classes.pop() if len(classes) == 1 else None

    def _returned_class(self, fid: str, depth: int) -> Optional[str]:
        """The project class every return of ``fid`` builds (a factory: ``return FlashBackend()``), when
        they all build the same one; None otherwise (a factory picking among several backends)."""
        if fid in self._returned_classes:
            return self._returned_classes[fid]
        self._returned_classes[fid] = None  # guards recursion
        fn = self.function(fid)
        returns = [ret.value for ret in fn["rets"] if not ret.is_yield]
        found = {self.class_of_value(fid, value, depth, factories=True) for value in returns}
        result = found.pop() if len(found) == 1 and returns else None
        self._returned_classes[fid] = result
        return result

    def _module_instance(self, summary: dict, scope_fid: str, name: str) -> Optional[str]:
        """The class of a module global bound once, at the top, to an instance of a class whose bases are
        all the project's; None where a function may rebind it (``global``), where it is bound more than
        once, or where a base comes from elsewhere (a ``dict`` subclass is a container, not a class of ours)."""
        values = self.local_values(scope_fid).get(name, [])
        if len(values) != 1 or name in self.function(scope_fid)["locals"] or name in self._rebound_names(summary):
            return None
        cls = self.class_of_value(scope_fid, values[0])
        if cls is None:
            return None
        for klass in self.mro(cls):
            owner, record = self.classes[klass]
            scope = fid_of(owner["module"], record["scope"] or MODULE_SCOPE)
            for base in record["bases"]:
                symbol = self.resolve(scope, base) if scope in self.functions else self.resolve_global(base)
                if base != "object" and (symbol is None or symbol.kind != CLASS):
                    return None
        return cls
