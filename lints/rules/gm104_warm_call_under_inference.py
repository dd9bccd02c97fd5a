from __future__ import annotations

from typing import Iterator

from ..analysis import ProjectAnalysis
from ..options import LOADING_PATTERNS
from ..model import Finding, Fix
from ..globs import name_match
from ..regions import INFERENCE
from ..rule import CRASH, Rule
from ..summary_records import callee_leaf


class WarmPathCalledUnderInferenceMode(Rule):
    CODE = "GM104"
    NAME = "warm-path-called-under-inference-mode"
    SUMMARY = "a warmup / autotune / capture function called from inside an inference-mode block"
    RATIONALE = ("The callee is clean, but its caller switches inference mode on around it: the same crash. "
                 "Reported at each warm call, in any module; the block is fixed at the caller, never by "
                 "rewriting a helper that serving shares.")
    FIX = ("Remove the inference_mode wrapper: safe when the block holds nothing but warm calls, otherwise an "
           "unsafe fix (`--unsafe-fixes`); a decorator becomes `@torch.no_grad()` (unsafe). No fix in code "
           "that serving shares.")
    TORCH_NAMES = ("torch.inference_mode",)
    INVALID = (
        "import torch\n"
        "class CudaGraphRunner:\n"
        "    def capture(self):\n"
        "        with torch.cuda.graph(self.graph):\n"
        "            self.model()\n"
        "def main(runner: CudaGraphRunner):\n"
        "    with torch.inference_mode():\n"
        "        runner.capture()  # expect: GM104:9\n",
        "import torch\n"
        "@torch.inference_mode()\n"
        "def start(engine):\n"
        "    engine.load()\n"
        "    kernel_warmup(engine)  # expect: GM104:5\n"
        "def kernel_warmup(engine):\n"
        "    engine.model()\n",
        {"engine/warm.py":
            "def _compile_moe_units(model):\n"
            "    model.moe()\n"
            "def warmup(model):\n"
            "    _compile_moe_units(model)\n",
         "engine/server.py":
            "import torch\n"
            "from engine import warm\n"
            "def launch(model):\n"
            "    with torch.inference_mode():\n"
            "        warm.warmup(model)  # expect: GM104:9\n"},
    )
    VALID = (
        # model loading called under inference mode (a test of the loaded model): no warmup to unwrap
        "import torch\n"
        "class Model:\n"
        "    def load_weights(self, weights):\n"
        "        self.w = torch.zeros(4)\n"
        "    @torch.no_grad()\n"
        "    def execute_model(self, x):\n"
        "        return x + self.w\n"
        "@torch.inference_mode()\n"
        "def test_reload(model: Model):\n"
        "    model.load_weights({})\n"
        "    model.load_model()\n",
        "import torch\n"
        "def main(runner):\n"
        "    with torch.no_grad():\n"
        "        runner.warmup()\n",
        "import torch\n"
        "def main(model, x):\n"
        "    with torch.inference_mode():\n"
        "        return model(x)\n",
    )

    def check(self, analysis: ProjectAnalysis) -> Iterator[Finding]:
        project, phases = analysis.project, analysis.phases
        for fid, with_index, origin in phases.inference_regions():
            if phases.is_warm_only(fid) or analysis.serving_mode_for(fid).mode == INFERENCE:
                continue  # GM101/GM102 report the switch itself; or every phase agrees
            fn = project.function(fid)
            shared = fid in phases.warm or fid in phases.serving
            warm_calls: dict[int, str] = {}
            names_only: dict[int, str] = {}
            for index, call in enumerate(fn["calls"]):
                if with_index >= 0 and not phases._inside(fn, call.with_index, with_index):
                    continue
                state = analysis.regions.inference_state(fid, call.with_index)
                if state is None or state[0] != INFERENCE:
                    continue
                targets = analysis.graph.call_targets(fid, index)
                for target in targets:
                    if phases.is_context_factory(target):
                        continue  # building a context runs nothing; the caller's block runs under it
                    warm = phases.reaches_warm(target)
                    if warm is not None and not phases.roots[warm].loading:  # a test may load under it
                        warm_calls[index] = warm
                        break
                func = call.func
                if not targets and func[0] == "n" and (pattern := name_match(callee_leaf(func),
                                                                         analysis.config.path_patterns)) \
                        and pattern not in LOADING_PATTERNS:
                    names_only[index] = f"`{func[1]}()` matches `{pattern}` (its class is not known)"
                    warm_calls[index] = ""
            if not warm_calls:
                continue
            fixes: tuple[Fix, ...] = ()
            if not shared:
                if with_index >= 0:
                    fixes = (self._with_fix(analysis, fid, with_index, set(warm_calls)),)
                else:
                    fixes = (Fix("decorator_no_grad", (origin.line, _decorator_col(fn, origin.line)), False),)
            for index, warm in sorted(warm_calls.items()):
                call = fn["calls"][index]
                if warm:
                    callee = project.label(warm)
                    note = f"{callee} is a warm path ({phases.why_warm(warm)})"
                else:
                    callee, note = f"`{call.func[1]}()`", names_only[index]
                yield self.finding(analysis, fid, call.line, call.col,
                                   f"warm path {callee} called under {origin.via} (line {origin.line})",
                                   (note, CRASH) + (("the caller is shared with serving: fix it there by hand",)
                                              if shared else ()), fixes)

    def _with_fix(self, analysis: ProjectAnalysis, fid: str, with_index: int, warm_calls: set[int]) -> Fix:
        fn = analysis.project.function(fid)
        record = fn["withs"][with_index]
        items = [i for i, modes in enumerate(analysis.regions.with_modes(fid, with_index))
                 if any(m.mode == INFERENCE and m.direct for m in modes)]
        safe = bool(items) and _only_warm(fn, with_index, warm_calls) and not any(
            record.items[i].has_as for i in items)
        positions = tuple((record.items[i].line, record.items[i].col) for i in items)
        if record.is_enter_context:  # `stack.enter_context(torch.inference_mode())`: the switch becomes a null context
            return Fix("null_context", positions[0] if positions else (record.line, record.col), bool(items))
        action = "unwrap_with" if len(items) == len(record.items) else "drop_with_item"
        return Fix(action, (record.line, record.col), safe, positions)


def _only_warm(fn: dict, with_index: int, warm_calls: set[int]) -> bool:
    """Every statement of the block is a bare warm call, or a with holding only such calls."""
    record = fn["withs"][with_index]
    bare = record.bare_calls
    inner = record.inner_withs
    if len(bare) + len(inner) != record.statements or not all(c in warm_calls for c in bare):
        return False
    return all(_only_warm(fn, w, warm_calls) for w in inner if fn["withs"][w].parent == with_index)


def _decorator_col(fn: dict, line: int) -> int:
    return next((dec.col for dec in fn["dec"] if dec.line == line), 0)
