"""The runtime check's records and their text: a source position (``Site``), an inference-mode entry, what
watch() saw when an inference tensor was made (``Allocation``), a kept inference tensor, the walk's report and
the error that carries it. Part of ``lints.runtime`` (import from there)."""
from __future__ import annotations

import dataclasses
import os
from typing import Iterable, NamedTuple, Optional, Sequence

INFERENCE_TENSOR_ERROR = "Inplace update to inference tensor outside InferenceMode is not allowed"


class Site(NamedTuple):
    """A source position: ``str()`` gives ``file:line:function`` (the file relative to the cwd when under it)."""

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{_display_path(self.filename)}:{self.lineno}:{self.function}"


class InferenceModeEntry(NamedTuple):
    """Where inference mode was turned on: ``how`` is ``entered`` (a with block, an ExitStack, an __enter__
    call), ``decorator`` (the site is the decorated function's ``@torch.inference_mode()`` line) or
    ``before watch()`` (it was already on when the watch began; the site is the watch's caller)."""

    site: Site
    how: str

    def __str__(self) -> str:
        return f"{self.site} ({self.how})"


@dataclasses.dataclass(frozen=True)
class Allocation:
    """What watch() saw when an inference tensor was made."""

    site: Optional[Site]  # the first frame outside torch and this module
    callers: tuple  # the next user frames out (Site), innermost first
    inference_mode_entries: tuple  # InferenceModeEntry in force, outermost first (empty: entry not seen)
    seen_by: str  # "torch_function" (the Python API) or "torch_dispatch" (an ATen op called from below it)
    op: str  # the function or ATen op that returned it

    @property
    def inference_mode_entry(self) -> Optional[InferenceModeEntry]:
        """The outermost entry in force: the one that turned inference mode on."""
        return self.inference_mode_entries[0] if self.inference_mode_entries else None


@dataclasses.dataclass(frozen=True)
class KeptInferenceTensor:
    """One inference tensor reachable from the walked objects."""

    path: str
    shape: tuple
    dtype: str
    device: str
    type_name: str  # Tensor, Parameter, or the subclass's name
    allocation: Optional[Allocation]  # None: made where no watch() saw it
    other_paths: tuple = ()  # further owners of the same tensor object (a few)
    via_storage: bool = False  # no record of its own: the allocation is that of a tensor sharing its storage

    @property
    def allocation_site(self) -> Optional[Site]:
        return self.allocation.site if self.allocation else None

    @property
    def inference_mode_entries(self) -> tuple:
        return self.allocation.inference_mode_entries if self.allocation else ()

    @property
    def inference_mode_entry(self) -> Optional[InferenceModeEntry]:
        return self.allocation.inference_mode_entry if self.allocation else None

    def describe(self) -> str:
        shape = ", ".join(str(n) for n in self.shape)
        kind = "" if self.type_name == "Tensor" else f" ({self.type_name})"
        lines = [f"{self.path}: {self.dtype}[{shape}] on {self.device}{kind}"]
        alloc = self.allocation
        if alloc is None:
            lines.append("  allocated where no watch() saw it (made outside watch(), in another thread, or "
                         "wrapped from memory torch did not allocate)")
        else:
            where = str(alloc.site) if alloc.site else "no frame outside torch"
            what = "shares its storage with a tensor made" if self.via_storage else "allocated"
            lines.append(f"  {what} at {where} ({alloc.op}, seen by {alloc.seen_by})")
            if alloc.callers:
                lines.append("    called from " + " <- ".join(str(site) for site in alloc.callers))
            if alloc.inference_mode_entries:
                first, *inner = alloc.inference_mode_entries
                text = f"  inference mode on since {first}"
                if inner:
                    text += "; entered again at " + ", ".join(str(entry) for entry in inner)
                lines.append(text)
            else:
                lines.append("  inference mode entered without torch.inference_mode (torch._C._InferenceMode "
                             "or C++): entry not seen")
        if self.other_paths:
            lines.append("  also reachable as " + ", ".join(self.other_paths))
        return "\n".join(lines)


class KeptInferenceTensors(list):
    """The walk's result: a list of :class:`KeptInferenceTensor`, plus ``notes`` (non-empty when a bound or
    an unreadable object cut the walk short: ``complete`` is then False) and ``objects_examined``."""

    def __init__(self, records: Iterable[KeptInferenceTensor] = (), notes: Sequence[str] = (),
                 complete: bool = True, objects_examined: int = 0):
        super().__init__(records)
        self.notes = list(notes)
        self.complete = complete
        self.objects_examined = objects_examined

    def format(self) -> str:
        if self:
            lines = [f"gradmode runtime check: {len(self)} kept inference tensor(s); an in-place torch update "
                     f"of one outside inference mode raises `RuntimeError: {INFERENCE_TENSOR_ERROR}`:"]
            lines += ["  " + record.describe().replace("\n", "\n  ") for record in self]
        else:
            lines = [f"gradmode runtime check: no kept inference tensors ({self.objects_examined} objects examined)"]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    __str__ = format


class KeptInferenceTensorsError(AssertionError):
    """Raised by :func:`assert_no_kept_inference_tensors`; ``report`` holds the walk's result."""

    def __init__(self, report: KeptInferenceTensors):
        super().__init__(report.format())
        self.report = report


def _display_path(filename: str) -> str:
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        relative = filename
    if not relative.startswith(os.pardir):
        return relative
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename
