"""A cheap pre-check, before libcst parses a file, for input that would stop or kill the run.

libcst's native parser is quadratic in the depth of the tree it builds, and deep trees can overflow
its native stack: a 2,000-term sum takes 1.2 s to parse, a 4,000-term one 5.4 s, and a 20,000-term
sum did not come back within 400 s (or takes the process down). Python builds such trees
from chains of operators (``a + b + ...``, ``a.b.c...``, ``f()()...``, ``not not ...``,
``lambda: lambda: ...``, ``x if c else y if ...``) and from nested brackets. Commas keep the tree
flat, so a 100,000-element list literal is fine and is not refused here.

``source_limits_error`` walks the tokens once (``tokenize``, linear) and measures, per logical line,

* the bracket nesting depth, and
* the *chain length*: the number of tokens between two commas at one bracket level (a statement
  boundary ends a chain), plus the longest chain inside any bracket group among them, since a group
  nests below the chain it is part of. A ``n``-term sum has a chain length of about ``2n``.

Measured (libcst 1.9, CPython 3.11, best of 3): sums of 500 / 1,000 / 2,000 / 4,000 terms parse in
0.06 / 0.25 / 1.15 / 5.4 s. At the limits below, the slowest shapes that still pass (499 chained
calls ``f()()...``, 332 subscripts ``a[0][0]...``, 499 attributes, 100 nested calls or lists) parse
in 0.1 s or less; the tokenizer pass costs about a tenth of a libcst parse of the same file.
"""
from __future__ import annotations

import io
import tokenize
from typing import Optional

# CPython itself refuses more than 200 nested brackets ("too many nested parentheses").
MAX_BRACKET_DEPTH = 100
# ~500 terms of a sum; real code stays far below (the longest chain in torch's own sources is reported
# by tests/test_hardening.py::test_real_code_is_far_below_the_limits).
MAX_CHAIN_TOKENS = 1000

_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")
_SKIP = frozenset({tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
                   tokenize.ENDMARKER, getattr(tokenize, "TYPE_COMMENT", -1)})


def source_limits_error(text: str, max_depth: int = MAX_BRACKET_DEPTH,
                        max_chain: int = MAX_CHAIN_TOKENS) -> Optional[str]:
    """A one-line reason why ``text`` is too deep or too long to parse safely, or None.

    Text that does not tokenize is passed (None): the parser reports the syntax error itself.
    """
    if len(text) <= max_chain and text.count("(") + text.count("[") + text.count("{") <= max_depth:
        return None  # too short to hold either
    depth, chain, line = _scan(text, max_depth, max_chain)
    if depth > max_depth:
        return f"line {line}: brackets nested more than {max_depth} deep; too deep to parse safely, file skipped"
    if chain > max_chain:
        return (f"line {line}: expression too long to parse safely (a chain of more than {max_chain} tokens "
                f"without a comma, such as a sum of about {max_chain // 2} terms or more), file skipped")
    return None


def measure(text: str) -> tuple[int, int]:
    """(deepest bracket nesting, longest chain) of ``text``, as ``source_limits_error`` counts them."""
    depth, chain, _ = _scan(text, 1 << 62, 1 << 62)
    return depth, chain


def _scan(text: str, max_depth: int, max_chain: int) -> tuple[int, int, int]:
    """(depth, chain, line): the maxima seen, stopping at the first line over a limit (``line``
    is where the logical line holding the last new maximum starts)."""
    # One frame per open bracket level: [tokens in the current chain, longest nested chain in it,
    # longest chain closed so far at this level].
    stack: list[list[int]] = [[0, 0, 0]]
    start_line = 0  # of the logical line being read; 0 before its first token
    line = 1
    most_depth = most_chain = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            kind = tok.type
            if kind in _SKIP:
                continue
            if kind == tokenize.NEWLINE:
                stack = [[0, 0, 0]]
                start_line = 0
                continue
            if not start_line:
                start_line = tok.start[0]
            frame = stack[-1]
            if kind == tokenize.OP:
                value = tok.string
                if value == "," or (value == ";" and len(stack) == 1):
                    frame[:] = [0, 0, max(frame[2], frame[0] + frame[1])]
                    if value == ";":
                        start_line = 0
                    continue
                if value in _OPEN:
                    frame[0] += 1
                    stack.append([0, 0, 0])
                    if len(stack) - 1 > most_depth:
                        most_depth, line = len(stack) - 1, start_line
                        if most_depth > max_depth:
                            break
                    continue
                if value in _CLOSE:
                    if len(stack) == 1:
                        break  # unbalanced: a syntax error for the parser to report
                    inner = stack.pop()
                    frame = stack[-1]
                    frame[1] = max(frame[1], inner[2], inner[0] + inner[1])
            frame[0] += 1
            if frame[0] + frame[1] > most_chain:
                most_chain, line = frame[0] + frame[1], start_line
                if most_chain > max_chain:
                    break
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return most_depth, most_chain, line
