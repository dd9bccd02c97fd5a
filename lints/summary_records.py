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
    ["f"]                    a new object computed here that holds no other (``a + b``, ``-a``, ``a < b``)
    ["?"]                    anything else
"""
from __future__ import annotations

from typing import Iterator, Optional

SCHEMA = 12
MODULE_SCOPE = "<module>"

# Records are positional lists (summaries of a large tree are tens of MB of JSON).
# call:      [func, args, kwargs, line, col, with, guard]
C_FUNC, C_ARGS, C_KWARGS, C_LINE, C_COL, C_WITH, C_GUARD = range(7)
# assign:    [target, value, op, line, col, with, guard]   (op: None, "with", or an AugAssign operator)
A_TARGET, A_VALUE, A_OP, A_LINE, A_COL, A_WITH, A_GUARD = range(7)
# return:    [value, line, col, with, is_yield]
R_VALUE, R_LINE, R_COL, R_WITH, R_YIELD = range(5)
# with:      [line, col, items, parent, is_enter_context, end_line, statements, bare_calls, inner_withs]
#            (statements of the body; calls that are whole statements of it; withs that are statements of it)
W_LINE, W_COL, W_ITEMS, W_PARENT, W_ENTER, W_END, W_STATEMENTS, W_BARE_CALLS, W_INNER = range(9)
# item:      [expr, line, col, has_as]
I_EXPR, I_LINE, I_COL, I_AS = range(4)
# guard (an if-branch): [names in the test, parent, in_orelse, line, names the test finds missing or stale]
# (``branch_tests.missing_names``: the body of `if self._buf is None:` allocates it; of `if self._pool is not
# None:` it does not)
G_NAMES, G_PARENT, G_ORELSE, G_LINE, G_MISSING = range(5)
# decorator: [expr, line, col]
D_EXPR, D_LINE, D_COL = range(3)
# A function's "blocks": [first line, last line] of each body of a loop, a try (its handlers, else and
# finally too) and a match case, which may run without the code before or after it (if-branches are
# guards and with-bodies are withs).
# A function's "notable": the indices of its calls whose callee's name ends in a word of
# ``names.NOTABLE_CALL_LEAVES`` (``f().new_empty(...)`` included), in order.


def callee_leaf(func: list) -> str:
    """The last part of the name a call's callee is spelt with (``a.b.f`` and ``g().f``: ``f``); "" if none."""
    return func[1].rpartition(".")[2] if func[0] == "n" else func[2] if func[0] == "a" else ""


def enclosing_withs(fn: dict, with_index: int) -> Iterator[int]:
    """``with_index`` and the withs around it, innermost first (none for -1)."""
    withs = fn["withs"]
    while with_index >= 0:
        yield with_index
        with_index = withs[with_index][W_PARENT]


def method_call(func: list) -> tuple[Optional[list], str]:
    """A callee spelt ``receiver.method`` (``a.b.f`` or ``g().f``) as its receiver's tagged form and
    the method's name; ``(None, "")`` for a bare name or anything else."""
    if func[0] == "a":
        return func[1], func[2]
    if func[0] == "n" and "." in func[1]:
        receiver, _, method = func[1].rpartition(".")
        return ["n", receiver], method
    return None, ""
