"""What GM201 and GM202 share: lazy allocations paired with the in-place updates of their buffer."""
from __future__ import annotations

from ..analysis import ProjectAnalysis
from ..buffers import Allocation, Mutation


def lazy_buffers(analysis: ProjectAnalysis) -> list[tuple[Allocation, list[Mutation]]]:
    cached = getattr(analysis, "_lazy_buffers", None)
    if cached is not None:
        return cached
    buffers = analysis.buffers
    by_key = buffers.mutations()
    out = []
    for alloc in buffers.allocations:
        found = []
        for key, mutations in by_key.items():
            if buffers.matches(alloc.key, key):
                for mutation in mutations:
                    if mutation.fid == alloc.fid and _inside_guard(analysis, mutation, alloc):
                        continue  # initialisation right after the allocation runs in its own mode
                    if mutation not in found:
                        found.append(mutation)
        if found:
            found.sort(key=lambda m: (analysis.project.path_of(m.fid) != analysis.project.path_of(alloc.fid),
                                      m.line))
            out.append((alloc, found))
    analysis._lazy_buffers = out
    return out


def _inside_guard(analysis: ProjectAnalysis, mutation: Mutation, alloc: Allocation) -> bool:
    if alloc.guard < 0:
        return False
    guards = analysis.project.function(alloc.fid)["guards"]
    guard = mutation.guard
    while guard >= 0:
        if guard == alloc.guard:
            return True
        guard = guards[guard][1]
    return False
