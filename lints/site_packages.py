"""The environment's site-packages folders, and what changes when a distribution is installed there.

Apart from ``lints.libraries`` (which reads the libraries themselves): a run whose results are cached or carried
asks only for these, to tell whether its results still hold.
"""
from __future__ import annotations

import hashlib
import os
import sysconfig
from typing import Iterable, Optional


def site_folders(python: Optional[str]) -> list[str]:
    """The site-packages folders to read: the running interpreter's, or those beside ``python``."""
    if not python:
        found = [sysconfig.get_paths().get(key) for key in ("purelib", "platlib")]
        return _distinct(p for p in found if p and os.path.isdir(p))
    path = os.path.abspath(os.path.expanduser(python))
    if os.path.isdir(path) and os.path.basename(path) in ("site-packages", "dist-packages"):
        return [path]
    prefix = path if os.path.isdir(path) else os.path.dirname(os.path.dirname(path))  # venv/bin/python
    out = []
    for lib in ("lib", "lib64", "Lib"):
        folder = os.path.join(prefix, lib)
        if os.path.basename(folder) == "Lib" and os.path.isdir(os.path.join(folder, "site-packages")):
            out.append(os.path.join(folder, "site-packages"))
            continue
        try:
            versions = sorted(os.listdir(folder))
        except OSError:
            continue
        out.extend(os.path.join(folder, v, "site-packages") for v in versions
                   if v.startswith("python") and os.path.isdir(os.path.join(folder, v, "site-packages")))
    return _distinct(out)


def environment_key(sites: list[str]) -> str:
    """What changes when a distribution is installed, upgraded or removed (for the results cache)."""
    h = hashlib.sha256()
    for site in sites:
        h.update(f"|{site}".encode("utf-8", "surrogateescape"))
        try:
            names = sorted(n for n in os.listdir(site) if n.endswith(".dist-info"))
        except OSError:
            continue
        for name in names:
            h.update(f";{name}".encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:16]


def _distinct(paths: Iterable[str]) -> list[str]:
    out: list[str] = []
    for path in paths:
        real = os.path.realpath(path)
        if real not in out:
            out.append(real)
    return out
