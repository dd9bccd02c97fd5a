"""What the GM1xx rules share: torch's switches written in warm-only code, with why it is warm."""
from __future__ import annotations

from typing import Iterator

from ..analysis import ProjectAnalysis, Switch


def mismatched_warm_functions(analysis: ProjectAnalysis, mode: str) -> Iterator[str]:
    """Warm-only functions where a ``mode`` switch disagrees with the serving grad mode that applies there."""
    serving = "no_grad" if mode == "inference_mode" else "inference_mode"
    return (fid for fid in analysis.warm_functions() if analysis.serving_mode_for(fid).mode == serving
            and not (mode == "no_grad" and analysis.phases.is_loading_only(fid)))  # weights load under no_grad


def warm_switches(analysis: ProjectAnalysis, mode: str) -> Iterator[tuple[Switch, str]]:
    """(switch, why the function is warm) for each enabled ``mode`` switch in warm-only code whose
    serving mode differs, around code that calls something (a region that calls nothing allocates nothing)."""
    for fid in mismatched_warm_functions(analysis, mode):
        switches = [s for s in analysis.switches(fid) if s.mode == mode and (
            s.role not in ("with", "decorator") or analysis.runs_code(fid, s.with_index))]
        if switches:
            why = analysis.phases.why_warm(fid)
            for switch in switches:
                yield switch, why


def where(analysis: ProjectAnalysis, fid: str) -> str:
    return f"in warm path {analysis.project.label(fid)}"
