"""Each kept allocation with the in-place updates of its buffer that run after it: what GM201 and GM202 pair."""
from __future__ import annotations

from typing import NamedTuple

from .buffer_allocations import BufferKey
from .buffers import Allocation, Buffers, Mutation
from .project import Project
from .provenance import CONSTRUCTORS
from .summary_records import enclosing_guards


class KeptBuffers(NamedTuple):
    allocations: list[Allocation]
    # each allocation with the in-place updates of its buffer after it (what GM201 and GM202 report from)
    updated: list[tuple[Allocation, list[Mutation]]]


def kept_buffers_from_json(data: list) -> KeptBuffers:
    """``KeptBuffers`` from its JSON data (records as arrays), as the analysis's forked child sends it."""
    allocations, updated = data

    def allocation(fields: list) -> Allocation:
        return Allocation(BufferKey(*fields[0]), *fields[1:])

    return KeptBuffers([allocation(a) for a in allocations],
                       [(allocation(a), [Mutation(*m) for m in mutations]) for a, mutations in updated])


def updates_after(project: Project, buffers: Buffers) -> list[tuple[Allocation, list[Mutation]]]:
    by_key = buffers.mutations()
    out = []
    for alloc in buffers.allocations:
        found = []
        seen = set()
        candidates = [alloc.key]
        if alloc.key.kind == "attr" and alloc.key.owner in project.classes:
            # the same attribute of a base class or a subclass is the same buffer
            related = set(project.mro(alloc.key.owner)) | set(project.subclasses(alloc.key.owner))
            candidates = [alloc.key._replace(owner=owner) for owner in sorted(related)]
        for key in candidates:
            if key in by_key:
                for mutation in by_key[key]:
                    if mutation.fid == alloc.fid and not mutation.entry_fid and (
                            _inside_guard(project, mutation, alloc) or (not alloc.lazy and (
                                alloc.guard < 0 or project.function(alloc.fid)["name"] in CONSTRUCTORS)
                                and mutation.line >= alloc.line)):
                        continue  # initialisation right after the allocation runs in its own mode
                    if mutation not in seen:
                        seen.add(mutation)
                        found.append(mutation)
        if found:
            found.sort(key=lambda m: (project.path_of(m.fid) != project.path_of(alloc.fid), m.line))
            out.append((alloc, found))
    return out


def _inside_guard(project: Project, mutation: Mutation, alloc: Allocation) -> bool:
    if alloc.guard < 0:
        return False
    return alloc.guard in enclosing_guards(project.function(alloc.fid), mutation.guard)
