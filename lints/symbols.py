"""What a name may denote, as the project index resolves it (``lints/project.py``)."""
from __future__ import annotations

from sys import intern
from typing import NamedTuple

# What a name may denote.
FUNC, CLASS, MODULE, EXTERNAL, INSTANCE, LOCAL, PARAM, GLOBAL, FIELD = (
    "func", "class", "module", "external", "instance", "local", "param", "global", "field")


class Symbol(NamedTuple):
    kind: str
    target: str  # fid / cid / module name / full dotted name
    name: str = ""  # the local, param, global or field name
    owner: str = ""  # the function (for locals/params) or class (for fields) it belongs to


def fid_of(module: str, qual: str) -> str:
    # interned: the memos and edges of a big project hold hundreds of thousands of copies of a few fids
    return intern(f"{module}:{qual}")
