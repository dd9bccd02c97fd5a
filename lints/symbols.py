"""What a name may denote, as the project index resolves it (``lints/project.py``)."""
from __future__ import annotations

from typing import NamedTuple

from .equal_objects import SharedObjects

# What a name may denote.
FUNC, CLASS, MODULE, EXTERNAL, INSTANCE, LOCAL, PARAM, GLOBAL, FIELD = (
    "func", "class", "module", "external", "instance", "local", "param", "global", "field")


class Symbol(NamedTuple):
    kind: str
    target: str  # fid / cid / module name / full dotted name
    name: str = ""  # the local, param, global or field name
    owner: str = ""  # the function (for locals/params) or class (for fields) it belongs to


def fid_of(module: str, qual: str) -> str:
    # one object per fid: the memos and edges of a big project held hundreds of thousands of copies of a few
    fid = f"{module}:{qual}"
    _FIDS.bound()
    return _FIDS.setdefault(fid, fid)


_FIDS = SharedObjects(1 << 21)
