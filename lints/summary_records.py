"""The layout of a summary's records, and small readers of them.

A summary (``lints/summary.py`` builds it) is plain JSON data: every position is ``(line, column)``
with 1-based lines and 0-based columns counted in characters, as libcst and flake8 count them.
Expressions are kept in a small tagged form, enough to follow names, calls and context objects:

    ["n", "a.b.c"]           a dotted name (``getattr(torch, "inference_mode")`` is ``torch.inference_mode``)
    ["c", i]                 the result of call ``i`` of the same function (see ``calls``)
    ["b", [e, ...]]          ``e or ...`` / ``e and ...``
    ["i", body, orelse]      ``body if test else orelse``
    ["k", value]             a constant (bool, None, int, float, str; None for one JSON cannot give back)
    ["l", body]              ``lambda: body``
    ["s", e]                 ``e[...]`` (the indexed value)
    ["a", e, "attr"]         ``e.attr`` where ``e`` is not a dotted name (``f().attr``)
    ["t", [e, ...]]          a tuple display ``(e, ...)`` (a starred element is ``["?"]``)
    ["m", e]                 a list, set or generator comprehension of ``e`` (``[torch.empty(n) for _ in r]``)
    ["u", e, i]              element ``i`` of ``e`` unpacked (``a, b = e``; ``for a, b in e``: of ``["s", e]``)
    ["r", ["a.b", ...]]      a list, set or dict display of names alone (``{"fp8": FP8Method}``: a registry)
    ["f"]                    a new object computed here that holds no other (``a + b``, ``-a``, ``a < b``)
    ["?"]                    anything else
"""
from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Iterator, NamedTuple, Optional

from .equal_objects import SharedObjects

SCHEMA = 17
MODULE_SCOPE = "<module>"
# The fields of a summary, of a function in it and of a class: a field added to a function or a class (one that
# may hold a position) makes every shape unknown to ``lints.shifts`` until it learns it.
SUMMARY_FIELDS = frozenset({"schema", "path", "module", "package", "functions", "classes", "star"})


def new_function(name: str, qual: str, line: int, col: int, cls: Optional[str], parent: Optional[str]) -> dict:
    """A function's summary before ``lints.summary`` walks its body: every field, in order, empty."""
    return {"name": name, "qual": qual, "line": line, "col": col, "cls": cls, "parent": parent,
            "params": [], "ann": {}, "defaults": {}, "dec": [], "calls": [], "withs": [], "rets": [],
            "assigns": [], "guards": [], "imports": {}, "globals": [], "locals": [], "nested": [],
            "notable": [], "blocks": [], "deferred": [], "asserts": [], "other_binds": [], "taken": []}


# A function's fields in the order they are made; "ret" (what it returns, where annotated) is added after them.
FUNCTION_FIELD_ORDER = tuple(new_function("", "", 0, 0, None, None))
FUNCTION_FIELDS = frozenset((*FUNCTION_FIELD_ORDER, "ret"))
CLASS_FIELDS = frozenset({"name", "qual", "line", "bases", "methods", "scope", "fields", "record_fields",
                          "makers", "aliases"})

# Records are NamedTuples: named fields, and still JSON arrays (summaries of a large tree are tens of MB of
# JSON). `bench/record_decoding.py` measured them against plain lists and msgspec structs.


class Call(NamedTuple):
    func: list
    args: list
    kwargs: dict
    line: int
    col: int
    with_index: int  # the innermost with around it (-1: none)
    guard: int  # the innermost if-branch around it (-1: none)


class Assign(NamedTuple):
    target: list
    value: list
    op: Optional[str]  # None, "with", or an AugAssign operator
    line: int
    col: int
    with_index: int
    guard: int


class Return(NamedTuple):
    value: list
    line: int
    col: int
    with_index: int
    is_yield: bool


class Item(NamedTuple):
    """One item of a with statement."""
    expr: list
    line: int
    col: int
    has_as: bool


class With(NamedTuple):
    line: int
    col: int
    items: list  # of Item
    parent: int  # the with around it (-1: none)
    is_enter_context: bool
    end_line: int
    statements: list  # the statements of its body
    bare_calls: list  # the calls that are whole statements of its body
    inner_withs: list  # the withs that are statements of its body


class Guard(NamedTuple):
    """An if-branch."""
    names: list  # the names in its test
    parent: int  # the branch around it (-1: none)
    in_orelse: bool
    line: int
    missing: list  # the names its test finds missing or stale (``branch_tests.missing_names``)
    none_clauses: list  # what its test says of plain names being None where the branch runs (``none_clauses``)


class Assertion(NamedTuple):
    """An ``assert``, or an ``if`` whose body ends by leaving the block (``raise``, ``return``, ``continue``,
    ``break``), that tells of plain names whether they are None: the rest of the block runs only where the assert
    held, or the if's test failed (``assert x is not None``, ``if x is None: raise ...``)."""
    guard: int  # the innermost if-branch around it (-1: none)
    with_index: int  # the innermost with around it: its exit may swallow the exception, so it holds inside only
    line: int  # the last line of the statement: the clauses hold after it
    none_clauses: list  # as ``branch_tests.none_clauses`` gives them


class Decorator(NamedTuple):
    expr: list
    line: int
    col: int


def with_records(summary: dict) -> dict:
    """``summary`` with its records as the NamedTuples above, in place (JSON gives them back as lists).

    Decoded summaries are read, never written, so what is equal may be one object, across every summary decoded in
    the run: every empty list and dict of a function and of a call, the leaves of calls, arguments, assignments,
    returns and defaults (``["n", "self.x"]``, ``["c", 0]``, ``["k", None]``, ``["f"]``) and those inside their
    composite expressions, equal arguments and keywords of calls, equal lists of names, the strings of names,
    parameters, annotations, imports and classes, line numbers, and the keys of a function's dict.
    The decoded summaries of the four trees of ``bench/monorepo.py``: 2,601 MiB with none of it shared, 1,268 MiB
    now (NOTES, "Memory" and "Under 2 GB"); sglang 0.5.23's rows decode in 3.9-4.1 s of CPU, JSON included (3.0-3.15
    s before the function dicts, inner leaves, arguments, keywords and lists were shared).
    Records of any other shape raise, as before; a leaf of any other shape is kept as it is."""
    _made_tables()
    leaf = _shared_leaf
    empty = _EMPTY_LIST
    text = _STRINGS.setdefault
    number = _NUMBERS.get
    same_args, same_kwargs = _ARGUMENTS.setdefault, _KEYWORDS.setdefault
    texts, clauses = _shared_texts, _shared_clauses
    functions = summary["functions"]
    for qual, fn in functions.items():
        for field, value in fn.items():
            if type(value) is str:
                fn[field] = text(value, value)
            elif not value:
                if type(value) is list:
                    fn[field] = empty
                elif type(value) is dict:
                    fn[field] = _EMPTY_DICT
        calls = fn["calls"]
        if calls and type(calls[0]) is list:
            records = []
            for call in calls:
                args, kwargs = call[1], call[2]
                if not args and type(args) is list:
                    args = empty
                elif len(args) == 1:  # equal arguments one list: the leaves are shared, so equal lists hold the same
                    arg = leaf(args[0])  # objects (one argument keyed by its id, more by a tuple of ids)
                    args = same_args(id(arg), [arg])
                else:
                    args = list(map(leaf, args))
                    args = same_args(tuple(map(id, args)), args)
                if not kwargs and type(kwargs) is dict:
                    kwargs = _EMPTY_DICT
                else:
                    kwargs = {text(keyword, keyword): leaf(value) for keyword, value in kwargs.items()}
                    kwargs = same_kwargs((*kwargs, *map(id, kwargs.values())), kwargs)  # (keywords are str)
                records.append(Call(leaf(call[0]), args, kwargs, number(call[3], call[3]), *call[4:]))
            fn["calls"] = records
        assigns = fn["assigns"]
        if assigns and type(assigns[0]) is list:
            fn["assigns"] = [Assign(leaf(a[0]), leaf(a[1]), a[2], number(a[3], a[3]), *a[4:]) for a in assigns]
        rets = fn["rets"]
        if rets and type(rets[0]) is list:
            fn["rets"] = [Return(leaf(r[0]), number(r[1], r[1]), *r[2:]) for r in rets]
        guards = fn["guards"]
        if guards and type(guards[0]) is list:
            fn["guards"] = [Guard(texts(g[0]), g[1], g[2], number(g[3], g[3]), texts(g[4]), clauses(g[5]), *g[6:])
                            for g in guards]
        for field, record in _OTHER_RECORDS.items():
            records = fn[field]
            if records and type(records[0]) is list:
                fn[field] = [record(*r) for r in records]
        withs = fn["withs"]
        if withs and type(withs[0]) is list:
            fn["withs"] = [With(w[0], w[1], [Item(*i) for i in w[2]], *w[3:]) for w in withs]
        for field in _NAME_LISTS:
            names = fn[field]
            if names is not empty:  # (most are, since the first loop above)
                fn[field] = texts(names)
        for field in _NAME_TABLES:
            table = fn[field]
            if table:
                fn[field] = {text(key, key): text(value, value) for key, value in table.items()}
        defaults = fn["defaults"]
        for key, value in defaults.items():
            defaults[key] = leaf(value)
        if len(fn) >= _FIELD_COUNT and tuple(fn) in _SHARED_KEY_ORDERS:  # (a planted name never reaches ``setattr``)
            functions[qual] = _with_shared_keys(fn)
    for cls in summary["classes"].values():
        for field, value in cls.items():
            if type(value) is str:
                cls[field] = text(value, value)
            elif type(value) is list:
                cls[field] = texts(value)
    for table in _SHARED_TABLES:
        table.bound()
    return summary


def forget_shared_objects() -> None:
    """Empty the tables of shared objects once a run's summaries are decoded: what was handed out stays shared, and
    the tables' keys (about 40 MiB on the four trees of ``bench/monorepo.py``) are not kept through the analysis."""
    for table in _SHARED_TABLES:
        table.clear()


def records_or_none(summary: dict) -> Optional[dict]:
    """``with_records(summary)``, or None where its records are of another shape (a cache's row garbled, or the
    checkout's to plant): a miss for the cache that read it, the file summarised again."""
    try:
        return with_records(summary)
    except (TypeError, IndexError, KeyError, AttributeError, ValueError):
        return None


_OTHER_RECORDS = {"dec": Decorator, "asserts": Assertion}
_NAME_LISTS = ("params", "locals", "globals", "other_binds", "nested", "taken")
_NAME_TABLES = ("ann", "imports")  # name -> a dotted name
_EMPTY_LIST: list = []
_EMPTY_DICT: dict = {}
# The tables a run adds to are bounded (a server meets new values for ever), and keyed so that values of two types
# JSON tells apart but Python finds equal (``1 == True``) never meet in a valid row: a garbled row's leaf reaches no
# other summary (``_STRINGS`` may hand a garbled `1` to another garbled row's `True`; a valid row asks only for str).
_NAMES = SharedObjects(1 << 20)  # dotted name -> ["n", name]
_CONSTANTS = SharedObjects(1 << 18)  # (type, value) -> ["k", value]
# A call's arguments by the ids of their leaves, and its keywords by their names and the ids of their values: the
# table holds the list or dict, which holds the objects, so an id is never another object's while its key is there.
_ARGUMENTS = SharedObjects(1 << 20)
_KEYWORDS = SharedObjects(1 << 19)
_STRINGS = SharedObjects(1 << 21)
_TEXT_LISTS = SharedObjects(1 << 19)  # names -> the list of them
_CLAUSES = SharedObjects(1 << 18)  # clauses of tests, each literal spelt name= (None) or name! (not None)
_SHARED_TABLES = (_NAMES, _CONSTANTS, _ARGUMENTS, _KEYWORDS, _STRINGS, _TEXT_LISTS, _CLAUSES)
_name_of, _constant_of = _NAMES.setdefault, _CONSTANTS.setdefault
# Made once and never added to: a garbled `True` for 1 gets 1, and nothing of it reaches another summary.
# made at the first decoding (about 1 ms), not at import: a run that carries its findings decodes no row with records
_NUMBERS: dict[int, int] = {}  # lines (CPython shares only -5..256)
_CALL_RESULTS: dict[int, list] = {}  # call index -> ["c", index]


def _made_tables() -> None:
    if not _NUMBERS:
        _NUMBERS.update((n, n) for n in range(1 << 13))
        _CALL_RESULTS.update((n, ["c", n]) for n in range(1 << 10))
_ALONE = {"f": ["f"], "?": ["?"]}


class _FunctionFields:
    """Lends its instances' ``__dict__`` to decoded functions: the dicts of a class's instances share one table of
    keys (PEP 412), so each function's fields cost a row of values, not a table of its own (the four trees of
    ``bench/monorepo.py``: 218 K functions, 832 -> 288 bytes each, and no copy of the field names per module)."""


# Only these orders: CPython 3.9 and 3.10 stop sharing a class's keys for good once one instance's dict holds
# them in another order or without one of them (a row missing a field would cost every function decoded after it).
_SHARED_KEY_ORDERS = frozenset({FUNCTION_FIELD_ORDER, (*FUNCTION_FIELD_ORDER, "ret")})
_FIELD_COUNT = len(FUNCTION_FIELD_ORDER)


def _with_shared_keys(fn: dict) -> dict:
    """A plain dict equal to ``fn``, its keys in the same order, whose table of keys is shared."""
    holder = _FunctionFields()
    deque(map(setattr, repeat(holder), fn.keys(), fn.values()), 0)
    return holder.__dict__


def _shared_texts(names: list) -> list:
    """One list for equal lists of names (``["self", "x"]`` of parameters, a test's names), each string the shared
    one; the shared empty list for none."""
    if not names:
        return _EMPTY_LIST
    if len(names) == 1:  # one name keyed by itself, more by their tuple
        key = _STRINGS.setdefault(names[0], names[0])
        found = _TEXT_LISTS.get(key)
        if found is None:
            found = _TEXT_LISTS[key] = [key]
        return found
    key = tuple(map(_STRINGS.setdefault, names, names))
    found = _TEXT_LISTS.get(key)
    if found is None:
        found = _TEXT_LISTS[key] = list(key)
    return found


def _shared_clauses(clauses: list) -> list:
    """One list for equal clauses of tests (``[[["x", True]]]``: ``branch_tests.none_clauses``), where each literal is
    a name and a bool (a garbled ``1`` for ``True`` shares nothing); the shared empty list for none."""
    if not clauses:
        return _EMPTY_LIST
    key = []
    for clause in clauses:
        if type(clause) is not list:
            return clauses
        for literal in clause:
            if type(literal) is not list or len(literal) != 2 or type(literal[0]) is not str \
                    or type(literal[1]) is not bool:
                return clauses
        key.append(tuple(name + ("=" if is_none else "!") for name, is_none in clause))
    return _CLAUSES.setdefault(tuple(key), clauses)


def _shared_leaf(expr: list, depth: int = 6) -> list:
    """The shared object equal to ``expr`` where it is a well-formed leaf (``["n", str]``, ``["c", int]``, ``["k",
    str|int|bool|None]``, ``["f"]``, ``["?"]``); else ``expr``, with the leaves it holds ``depth`` levels down shared
    in place (``["s", ["n", "self.k"]]``, ``["a", ["c", 0], "view"]``). A row of any other shape, planted or garbled,
    shares nothing: its objects never reach another summary."""
    if type(expr) is list:
        if len(expr) == 2:
            tag, value = expr
            kind = type(value)
            if tag == "n":
                if kind is str:
                    return _name_of(value, expr)
            elif tag == "c":
                if kind is int:
                    return _CALL_RESULTS.get(value, expr)
            elif tag == "k" and (kind is str or kind is int or kind is bool or value is None):
                return _constant_of((kind, value), expr)
            elif depth and kind is list:
                if tag == "s" or tag == "m" or tag == "l":
                    expr[1] = _shared_leaf(value, depth - 1)
                elif tag == "t" or tag == "b":
                    value[:] = [_shared_leaf(part, depth - 1) for part in value]
        elif len(expr) == 1:
            return _ALONE.get(expr[0], expr) if type(expr[0]) is str else expr
        elif len(expr) == 3 and depth:
            tag = expr[0]
            if tag == "a" or tag == "u":
                expr[1] = _shared_leaf(expr[1], depth - 1)
                if tag == "a" and type(expr[2]) is str:
                    expr[2] = _STRINGS.setdefault(expr[2], expr[2])
            elif tag == "i":
                expr[1] = _shared_leaf(expr[1], depth - 1)
                expr[2] = _shared_leaf(expr[2], depth - 1)
    return expr


# A function's "blocks": [first line, last line] of each body of a loop, a while loop's test, a try (its
# handlers, else and finally too) and a match case, which may run without the code before or after it, or
# again (if-branches are guards and with-bodies are withs).
# A function's "other_binds": the names it binds otherwise than by an assignment "assigns" shows (an
# `except ... as`, a match capture, a `with ... as (a, b)`, `del`, a nested def or class, a `global` or
# `nonlocal` in it or in a function or class body nested in it).
# A function's "deferred": the indices of its calls written in a lambda's body or in a comprehension's lazy
# parts (its element, its tests, every iterable but the first): they run later, any number of times, or never,
# not where the statement holding them runs.
# A function's "taken": ``values_taken`` of it, sorted (its records' part of ``unnamed_calls``' question).
# A function's "notable": the indices of its calls that ``names.is_notable_call`` names (a callee's name
# ending in a word of ``names.NOTABLE_CALL_LEAVES``, ``f().new_empty(...)`` included; an in-place update;
# ``out=``), in order.


def callee_leaf(func: list) -> str:
    """The last part of the name a call's callee is spelt with (``a.b.f`` and ``g().f``: ``f``); "" if none."""
    return func[1].rpartition(".")[2] if func[0] == "n" else func[2] if func[0] == "a" else ""


def missing_first(fn: dict, guard: int, texts: set[str]) -> Optional[str]:
    """The one of ``texts`` a test around a fact finds missing or stale first (``if self._buf is None``, a size
    test, ``if k not in self._cache``: a name in it or below it), in the branch that runs then; None if none."""
    guards = fn["guards"]
    for around in enclosing_guards(fn, guard):
        record = guards[around]
        if not record.in_orelse:  # a test that finds the place missing or stale, not one that finds it there
            for name in record.missing:
                for text in texts:
                    if name == text or name.startswith(text + "."):
                        return text
    return None


def binding_may_reach(fn: dict, binding: tuple[int, int], use: tuple[int, int]) -> bool:
    """Whether a binding of a local may be what a use of it reads, each given as (guard, line). Not where the
    binding sits in another branch of an if than the use (the body and the else, an elif's branch), nor where it
    sits in an if statement that begins after the use and holds no part of it (a later statement: lines alone
    do not order one statement's parts, `a[g.zero_()] = (g := b)`). Always where a loop or a try body holds the
    binding (it may run again before the use, a while test included)."""
    if not any(start <= binding[1] <= end for start, end in fn["blocks"]):
        around_use = set(enclosing_guards(fn, use[0]))
        guards = fn["guards"]
        branches = {(guards[g].line, guards[g].parent): guards[g].in_orelse for g in around_use}
        for guard in enclosing_guards(fn, binding[0]):
            record = guards[guard]
            if branches.get((record.line, record.parent), record.in_orelse) != record.in_orelse:
                return False  # the other branch of an if the use is in
            if guard not in around_use and record.line > use[1]:
                return False  # an if statement after the use
    return not _none_tests_exclude(fn, binding, use)


def _none_tests_exclude(fn: dict, binding: tuple[int, int], use: tuple[int, int]) -> bool:
    """Whether no run reaches both the binding and the use, by what tests around them and asserts before them say
    of parameters the function never binds again being None (``if state is not None: ... else: out = dummy``,
    then ``assert state is not None`` before the use; with ``if has_idx and state is None: raise``, also
    ``assert idx is not None``). Asserts are taken to run, as type checkers take them; a run's tests of such
    parameters agree, so the clauses of both places hold together, and unit propagation finding none can hold
    proves it."""
    at_binding = none_clauses_at(fn, *binding)
    if not at_binding:
        return False  # nothing holds there that could contradict the use
    clauses = [clause for clause in (*at_binding, *none_clauses_at(fn, *use))
               if all(_never_rebound(fn, name) for name, _is_none in clause)]
    return bool(clauses) and _contradict(clauses)


def none_clauses_at(fn: dict, guard: int, line: int) -> list[list]:
    """What holds of plain names being None where a fact at ``guard``, ``line`` runs: the clauses of the
    if-branches around it and of the asserts before it whose block holds it (one in a loop or a try body that
    does not hold the fact may not have run)."""
    guards = fn["guards"]
    around = {-1}
    found: list[list] = []
    for index in enclosing_guards(fn, guard):
        around.add(index)
        found.extend(guards[index].none_clauses)
    withs = fn["withs"]
    for assertion in fn["asserts"]:
        if assertion.guard in around and assertion.line < line and all(
                start <= line <= end for start, end in fn["blocks"] if start <= assertion.line <= end) and (
                assertion.with_index < 0 or line <= withs[assertion.with_index].end_line):
            found.extend(assertion.none_clauses)
    return found


def _contradict(clauses: list[list]) -> bool:
    """Whether unit propagation finds that the clauses cannot all hold (sound, not complete)."""
    known: dict[str, bool] = {}
    changed = True
    while changed:
        changed = False
        for clause in clauses:
            if any(known.get(name) is is_none for name, is_none in clause):
                continue  # holds
            open_literals = [(name, is_none) for name, is_none in clause if name not in known]
            if not open_literals:
                return True  # every literal fails
            if len(open_literals) == 1:
                name, is_none = open_literals[0]
                known[name] = bool(is_none)
                changed = True
    return False


def _never_rebound(fn: dict, name: str) -> bool:
    """Whether ``name`` is a parameter the function never binds again (no assignment, loop target, with-target,
    walrus, import, global, or binding of another kind: ``other_binds``)."""
    if name not in fn["params"] or name in fn["locals"] or name in fn["globals"] or name in fn["imports"] \
            or name in fn["other_binds"]:
        return False
    return not any(fact.target[0] == "n" and fact.target[1] == name for fact in fn["assigns"])


def enclosing_guards(fn: dict, guard: int) -> Iterator[int]:
    """``guard`` and the if-branches around it, innermost first (none for -1)."""
    guards = fn["guards"]
    while guard >= 0:
        yield guard
        guard = guards[guard].parent


_HOLDING = frozenset("tbiml")  # a display, `a or b`, `a if c else b`, a comprehension's element, a lambda's body


def objects_in(value: list) -> list[tuple]:
    """The call values and names ``value`` is, or holds in a display (of names too), one side of an `or` or an `if`, a
    comprehension or a lambda; not a call's argument (followed where the call is), an attribute or an item of
    it (those are other objects)."""
    if value[0] in "cn":
        return [(value[0], value[1])]
    if value[0] == "r":  # a display of names
        return [("n", name) for name in value[1]]
    if value[0] not in _HOLDING:
        return []
    parts = value[1] if value[0] in "tb" else value[1:]
    return [key for part in parts if part for key in objects_in(part)]


def values_taken(fn: dict) -> list[str]:
    """The attribute names the function stores, returns or hands to a call as values (``[s.load]``,
    ``Thread(target=s.load)``: a bound method is an attribute), and those it names to ``operator.methodcaller``
    or ``attrgetter``: its part of what ``unnamed_calls`` asks of a method's name, made with its summary."""
    taken: set[str] = set()

    def note(value: list) -> None:  # the value, or what a display, `a or b`, a lambda holds
        for tag, name in objects_in(value):
            if tag == "n" and "." in name:
                taken.add(name.rpartition(".")[2])

    for fact in fn["assigns"]:
        note(fact.value)
    for ret in fn["rets"]:
        note(ret.value)
    for call in fn["calls"]:
        for arg in call.args:
            note(arg)
        for arg in call.kwargs.values():
            note(arg)
        if call.func[0] == "n" and call.func[1].endswith(("methodcaller", "attrgetter")) and call.args \
                and call.args[0][0] == "k" and isinstance(call.args[0][1], str):
            taken.add(call.args[0][1].rpartition(".")[2])
    return sorted(taken)


def enclosing_withs(fn: dict, with_index: int) -> Iterator[int]:
    """``with_index`` and the withs around it, innermost first (none for -1)."""
    withs = fn["withs"]
    while with_index >= 0:
        yield with_index
        with_index = withs[with_index].parent


def method_call(func: list) -> tuple[Optional[list], str]:
    """A callee spelt ``receiver.method`` (``a.b.f`` or ``g().f``) as its receiver's tagged form and
    the method's name; ``(None, "")`` for a bare name or anything else."""
    if func[0] == "a":
        return func[1], func[2]
    if func[0] == "n" and "." in func[1]:
        receiver, _, method = func[1].rpartition(".")
        return ["n", receiver], method
    return None, ""
