"""Which stack frames are the program's: not torch's, not the runtime check's own (``lints/runtime*.py``),
and the ``Site`` of one. Part of ``lints.runtime``."""
from __future__ import annotations

import os
import types
from typing import Optional

import torch

from .runtime_records import Site

# Compared with frames' co_filename, so taken from code objects (or the same import path), never normalised.
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep

_SKIPPED_FILES: dict = {}  # co_filename -> whether its frames are torch's or the runtime check's


def _skipped(code: types.CodeType) -> bool:
    filename = code.co_filename
    skipped = _SKIPPED_FILES.get(filename)
    if skipped is None:
        skipped = _SKIPPED_FILES[filename] = filename.startswith(_TORCH_DIR) or _is_own_file(filename)
    return skipped


def _site_of(frame: types.FrameType) -> Site:
    code = frame.f_code
    return Site(code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name))


# The runtime check's modules: lints/runtime.py and lints/runtime_*.py, beside this one.
_OWN_PREFIX = os.path.join(os.path.dirname(_site_of.__code__.co_filename), "runtime")


def _is_own_file(filename: str) -> bool:
    return filename.startswith(_OWN_PREFIX) and filename.endswith(".py") and os.sep not in filename[len(_OWN_PREFIX):]


def _user_frames(frame: Optional[types.FrameType], limit: int) -> list:
    sites = []
    while frame is not None and len(sites) < limit:
        if not _skipped(frame.f_code):
            sites.append(_site_of(frame))
        frame = frame.f_back
    return sites
