"""What GM201 and GM202 share: lazy allocations paired with the in-place updates of their buffer."""
from __future__ import annotations

from ..analysis import ProjectAnalysis
from ..buffers import Allocation, Mutation


def lazy_buffers(analysis: ProjectAnalysis) -> list[tuple[Allocation, list[Mutation]]]:
    return analysis.kept_buffers.updated
