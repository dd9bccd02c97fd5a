"""Files outside any project (no marker or package above them): analysed with the files of their
folder that import them and what these import, not with the whole folder (``/tmp``, a home folder)."""
from __future__ import annotations

import ast
import os
import re

from .model import FileError
from .module_names import module_name_for, relative_import_base
from .sources import SourceFile, read_source, source_from_text
from .summary import parse_quietly
from .summary_jobs import ProjectFile, content_key, text_key


# At most this many files join loose files' project; at most this many files and bytes of their
# folder are read to look for importers (a loose file may sit in /tmp or a home folder).
LOOSE_IMPORTS_LIMIT = 1000
LOOSE_SCAN_LIMIT = 2000
LOOSE_SCAN_BYTES = 16 << 20


def loose_project(paths: list[str], folder: str, overrides: dict[str, str], max_bytes: int
                  ) -> tuple[list[str], bool]:
    """The modules analysed with loose files (and packages without a marker) of ``folder``, and
    whether every file there that may import one of them is among those (else who imports them is
    not known). Python puts a script's folder first on ``sys.path``: the project is ``paths``, the
    folder's scripts that import one of them, and what all of these import from the folder,
    transitively. ``paths`` hold their packages whole (``lint_project``): an import of one of them
    adds nothing, so a file of theirs that names no other module of the folder is not parsed (an
    unzipped package alone in its folder: none is)."""
    relative = not os.path.isabs(paths[0]) if paths else True
    out = list(paths)
    seen = {os.path.abspath(p) for p in out}

    def add(candidate: str) -> bool:
        if os.path.abspath(candidate) in seen or not os.path.isfile(candidate):
            return True
        if len(out) >= LOOSE_IMPORTS_LIMIT:
            return False
        seen.add(os.path.abspath(candidate))
        out.append(os.path.relpath(candidate) if relative else candidate)
        return True

    names = {module_name_for(p, folder)[0].split(".")[0] for p in paths}
    importers, complete = _scripts_importing(folder, names, seen, max_bytes)
    for candidate in importers:
        complete &= add(candidate)
    # a script one folder up may import these as modules of a namespace package (`tools.w`)
    parent, name = os.path.dirname(folder), os.path.basename(folder)
    if complete and parent != folder and not os.path.isfile(os.path.join(folder, "__init__.py")):
        above, known = _scripts_importing(parent, {name}, set(), max_bytes)
        complete = known and not above
    # what may import a module not yet here: a name of another module of the folder, or, in a file that
    # the imports brought in (its package is not whole), a relative import
    whole = {name for name in names if os.path.isfile(os.path.join(folder, name, "__init__.py"))
             or os.path.isfile(os.path.join(folder, name + ".py"))}  # not a namespace package's folder
    others = _other_modules(folder, whole)
    naming_others = re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, sorted(others)))) if others else None
    given = len(out)
    index = 0
    while index < len(out):
        path = out[index]
        index += 1
        source = source_from_text(path, overrides[path]) if path in overrides else read_source(path, max_bytes)
        if isinstance(source, FileError) or not (
                (naming_others is not None and naming_others.search(source.text))
                or (index > given and _RELATIVE_IMPORT.search(source.text))):
            continue
        for name in _imported_names(source, folder):
            parts = name.split(".")
            for n in range(1, len(parts) + 1):
                base = os.path.join(folder, *parts[:n])
                for candidate in (base + ".py", os.path.join(base, "__init__.py")):
                    if not add(candidate):
                        return out, False
    return out, complete


_RELATIVE_IMPORT = re.compile(r"^[ \t]*from[ \t]*\.", re.MULTILINE)


def _other_modules(folder: str, whole: set[str]) -> set[str]:
    """The names of the modules, packages and folders directly in ``folder`` (what an import from there
    may start with), less those of ``whole``."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return set()
    found = set()
    for entry in entries:
        name = entry.name[:-3] if entry.name.endswith(".py") else entry.name
        if name.isidentifier() and (entry.name.endswith(".py") or entry.is_dir()):
            found.add(name)
    return found - whole


def _scripts_importing(folder: str, names: set[str], skip: set[str], max_bytes: int) -> tuple[list[str], bool]:
    """The ``.py`` files of ``folder`` (not below it) that import a module named in ``names`` from
    there (an import line must name one before the file is parsed), and whether all were looked at
    (at most ``LOOSE_SCAN_LIMIT`` files and ``LOOSE_SCAN_BYTES``; one that cannot be read may be one)."""
    try:
        scanned = sorted(e.path for e in os.scandir(folder) if e.name.endswith(".py"))
    except OSError:
        return [], False
    if not names or len(scanned) > LOOSE_SCAN_LIMIT:
        return [], not scanned
    importing = re.compile(r"^[ \t]*(?:from[ \t]+(?:%s)\b|import[ \t][^\n]*\b(?:%s)\b)" % (
        "|".join(map(re.escape, names)), "|".join(map(re.escape, names))), re.MULTILINE)
    found: list[str] = []
    budget = LOOSE_SCAN_BYTES
    for candidate in scanned:
        if os.path.abspath(candidate) in skip:
            continue
        source = read_source(candidate, max_bytes)
        if isinstance(source, FileError):
            if os.path.isfile(candidate):
                return found, False
            continue
        budget -= len(source.raw)
        if budget < 0:
            return found, False
        if importing.search(source.text) and names & {n.split(".", 1)[0] for n in _imported_names(source, folder)}:
            found.append(candidate)
    return found, True


def loose_entries(members: list[str], folder: str, overrides: dict[str, str], max_bytes: int) -> list[ProjectFile]:
    """The entries of a loose project (``loose_project``), module names counted from ``folder``."""
    return [ProjectFile(p, *module_name_for(p, folder), text_key(p, overrides[p], max_bytes) if p in overrides
                        else content_key(p, max_bytes)) for p in members]


def _imported_names(source: SourceFile, folder: str) -> list[str]:
    """Every module name a file imports, absolute (``from a.b import c``: ``a.b`` and ``a.b.c``;
    relative ones resolved inside its package, its module name counted from ``folder``)."""
    try:
        tree = parse_quietly(source.text, source.path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # summarising it reports why
    module, is_package = module_name_for(source.path, folder)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = relative_import_base(module, is_package, node.level)
                if not base:
                    continue  # a script's relative import fails when it runs: nothing to follow
                head = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module:
                head = node.module
            else:
                continue
            names.extend([head, *(f"{head}.{alias.name}" for alias in node.names)])
    return names
