"""Module names: the folder imports are relative to, a file's dotted module name, the package a
relative import starts from."""
from __future__ import annotations

import os
from typing import Optional


def import_root(project_root: str) -> str:
    """The folder imports are relative to: above the project root while it is itself a package."""
    root = os.path.abspath(project_root)
    while os.path.isfile(os.path.join(root, "__init__.py")):
        parent = os.path.dirname(root)
        if parent == root:
            break
        root = parent
    return root


def module_name_for(path: str, root: str) -> tuple[str, bool]:
    """Dotted module name of ``path`` relative to the import root ``root``, and whether it is a package.

    Folders without ``__init__.py`` count as namespace packages, as Python treats them.
    """
    absolute = os.path.abspath(path)
    inside = os.path.join(root, "")
    # below the root (every file of a project walk): a slice, not relpath (a tenth of a server run's time)
    relative = (absolute[len(inside):] if absolute.startswith(inside) else os.path.relpath(absolute, root)
                ).replace(os.sep, "/")
    if relative.startswith("../"):
        relative = os.path.basename(path)
    parts = relative[:-3].split("/") if relative.endswith(".py") else relative.split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]) or "__init__", True
    return ".".join(parts), False


def module_names_for(paths: list[str], root: str) -> list[tuple[str, bool]]:
    """``module_name_for`` of each of ``paths``, a folder's part worked out once (sglang's 4,719 files lie in
    600 folders: each file's own ``abspath`` was a tenth of a pre-commit run)."""
    folders: dict[str, Optional[str]] = {}  # folder as spelt -> its dotted name below the root; None: ask per file
    names = []
    for path in paths:
        folder, name = os.path.split(path)
        if folder not in folders:
            package, _ = module_name_for(os.path.join(folder, "__init__.py"), root)
            below = os.path.abspath(folder) + os.sep
            folders[folder] = package if below.startswith(os.path.join(root, "")) and package != "__init__" else \
                "" if below == os.path.join(root, "") else None
        dotted = folders[folder]
        if dotted is None or not name.endswith(".py"):
            names.append(module_name_for(path, root))
        elif name == "__init__.py":
            names.append((dotted or "__init__", True))
        else:
            names.append((f"{dotted}.{name[:-3]}" if dotted else name[:-3], False))
    return names


def relative_import_base(module: str, is_package: bool, level: int) -> list[str]:
    """The package ``from <level dots>... import`` starts from inside ``module``, as parts ([] for an
    absolute import, or for one reaching above the top package: Python refuses it)."""
    if not level:
        return []
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    return base[:len(base) - (level - 1)] if level - 1 <= len(base) else []
