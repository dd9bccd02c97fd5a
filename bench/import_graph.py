"""The import structure of the shipped packages (``lints/``, ``codemods/``): cycles, big modules, front ends.

    python bench/import_graph.py            # exit 1 when there is a cycle or a front end imports another
    python bench/import_graph.py --edges    # also every edge, one per line

Every module is parsed (nothing is imported or run) and each import of a module of these packages
becomes an edge, resolved as Python resolves it (``from . import x``, ``from .x import y``,
``from ..x import y``, ``import lints.x``, ``from lints.x import y``). Edges are of three kinds:

* ``module``: run when the module is imported (at its top level, also inside ``try``/``if``);
* ``deferred``: inside a function, run when that is called (``from .rules import ALL_RULES`` in a
  function still ties the two modules: the cycle is only postponed);
* ``typing``: under ``if TYPE_CHECKING:``, never run.

A package whose ``__init__`` imports its modules through ``pkgutil.iter_modules(__path__)`` (the
rules) gets a ``module`` edge to each of them. Cycles are the strongly connected components of the
graph of ``module`` edges, then of ``module`` + ``deferred`` edges, then of all three; each is
printed with the edges inside it and the names they take.
"""
from __future__ import annotations

import argparse
import ast
import collections
import os
import sys
from typing import Iterator, NamedTuple, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("lints", "codemods")
BIG_LINES = 400
# Each front end with the modules that are its own (an alias, a fixture over it): imports inside
# one group are no import of another front end.
FRONT_ENDS = {
    "CLI": ("lints.cli",),
    "codemod": ("lints.codemod",),
    "flake8 plugin": ("lints.flake8_plugin",),
    "libcst command": ("codemods.gradmode", "lints.libcst_commands"),
    "runtime check": ("lints.runtime", "lints.pytest_plugin"),
    "language server": ("lints.server",),
}
# The launcher behind `python -m lints` and `gradmode-lint`: it starts the CLI, or the language server
# (`gradmode-lint server`), and is the one module allowed to import front ends.
LAUNCHER = "lints.__main__"
KINDS = ("module", "deferred", "typing")


class Edge(NamedTuple):
    source: str
    target: str
    kind: str
    names: tuple[str, ...]


def modules(root: str) -> dict[str, str]:
    """Dotted module name -> file, for every ``.py`` file of ``PACKAGES`` under ``root``."""
    found = {}
    for package in PACKAGES:
        for folder, subfolders, files in os.walk(os.path.join(root, package)):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    parts = os.path.relpath(path, root)[:-3].split(os.sep)
                    found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module) -> Iterator[tuple[ast.stmt, str]]:
    """Every import statement with its kind."""
    def visit(nodes, kind: str) -> Iterator[tuple[ast.stmt, str]]:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node, kind
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(ast.iter_child_nodes(node), "deferred" if kind == "module" else kind)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from visit(node.body, "typing")
                yield from visit(node.orelse, kind)
            else:
                yield from visit(ast.iter_child_nodes(node), kind)
    return visit(tree.body, "module")


def _discovers_submodules(tree: ast.Module) -> bool:
    """``pkgutil.iter_modules(__path__)`` at import: the package loads every module in it."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "iter_modules"
               and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "__path__"
               for node in ast.walk(tree))


def edges(found: dict[str, str]) -> list[Edge]:
    out: list[Edge] = []
    for module, path in found.items():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        is_package = os.path.basename(path) == "__init__.py"
        package = module if is_package else module.rpartition(".")[0]
        targets: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
        for node, kind in _imports(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _known(alias.name, found)
                    if target:
                        targets[(target, kind)].append(alias.asname or alias.name)
                continue
            if node.level:
                base_parts = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                target = submodule if submodule in found else _known(base, found)
                if target:
                    targets[(target, kind)].append(alias.name)
        if is_package and _discovers_submodules(tree):
            for other in found:
                if other.rpartition(".")[0] == module and not other.rpartition(".")[2].startswith("_"):
                    targets[(other, "module")].append("(discovered)")
        for (target, kind), names in targets.items():
            if target != module:
                out.append(Edge(module, target, kind, tuple(names)))
    return out


def _known(name: str, found: dict[str, str]) -> Optional[str]:
    """The module ``name`` names, or the nearest package above it we have (``lints.x.y``: ``lints.x``)."""
    while name:
        if name in found:
            return name
        name = name.rpartition(".")[0]
    return None


def cycles(graph: list[Edge]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    succ: dict[str, list[str]] = collections.defaultdict(list)
    for edge in graph:
        succ[edge.source].append(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    counter = 0
    for start in sorted({e.source for e in graph} | {e.target for e in graph}):
        if start in index:
            continue
        work = [(start, iter(succ[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(succ[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=REPO, help="the checkout to read (default: this one)")
    parser.add_argument("--edges", action="store_true", help="print every edge too")
    args = parser.parse_args()
    found = modules(args.root)
    graph = edges(found)
    bad = 0
    print(f"{len(found)} modules, {len(graph)} import edges "
          f"({', '.join(f'{sum(e.kind == k for e in graph)} {k}' for k in KINDS)})")
    for counted in (("module",), ("module", "deferred"), KINDS):
        label = " + ".join(counted)
        kept = [e for e in graph if e.kind in counted]
        found_cycles = cycles(kept)
        print(f"\ncycles of {label} imports: {len(found_cycles) or 'none'}")
        for members in found_cycles:
            print(f"  {' <-> '.join(members)}")
            for edge in sorted(kept):
                if edge.source in members and edge.target in members:
                    print(f"    {edge.source} -> {edge.target} ({edge.kind}): {', '.join(edge.names)}")
        bad += len(found_cycles) if "typing" not in counted else 0
    print(f"\nmodules over {BIG_LINES} lines:")
    sizes = {}
    for module, path in found.items():
        with open(path, encoding="utf-8") as handle:
            sizes[module] = sum(1 for _ in handle)
    for module, lines in sorted(sizes.items(), key=lambda item: -item[1]):
        if lines > BIG_LINES:
            print(f"  {lines:5d} {os.path.relpath(found[module], args.root)}")
    print("\nfront ends and what they import of this package:")
    group_of = {module: group for group, members in FRONT_ENDS.items() for module in members}
    for group, members in FRONT_ENDS.items():
        imported = sorted({e.target for e in graph if e.source in members and e.target not in members})
        others = [m for m in imported if m in group_of]
        bad += len(others)
        print(f"  {group} ({', '.join(members)}): {', '.join(m.removeprefix('lints.') for m in imported)}")
        for other in others:
            print(f"    IMPORTS ANOTHER FRONT END: {other} ({group_of[other]})")
    launched = sorted({e.target for e in graph if e.source == LAUNCHER} & set(group_of))
    print(f"  launcher ({LAUNCHER}): starts {', '.join(m.removeprefix('lints.') for m in launched)}")
    if args.edges:
        print("\nedges:")
        for edge in sorted(graph):
            print(f"  {edge.source} -> {edge.target} ({edge.kind}): {', '.join(edge.names)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
