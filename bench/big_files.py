"""Big-file scaling: seconds and peak RSS of one linter run on one generated serving module.

    python bench/big_files.py [--sizes 0.5,1,2,5]

Each module repeats a realistic serving block (a MoE layer with lazily allocated workspaces and
in-place updates, a model runner with an autotune context and a dummy run under inference mode, a
serving function) with fresh names until it reaches the size, so every block is analysed (nothing
is prefiltered away) and the findings grow with the size. Run in a temporary project, cold cache,
one process (`-j 1`).
"""
from __future__ import annotations

import argparse
import ast
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BLOCK = '''

class FusedMoE{i}:
    def __init__(self, hidden_size):
        self.hidden_size = hidden_size
        self._topk_idx_out = None
        self._final_hidden_states = None

    def _workspace(self, num_tokens, device):
        if self._final_hidden_states is None or self._final_hidden_states.shape[0] < num_tokens:
            self._final_hidden_states = torch.empty(num_tokens, self.hidden_size, device=device)
        return self._final_hidden_states[:num_tokens]

    def select_experts(self, router_logits, num_tokens, prev_n):
        if self._topk_idx_out is None or self._topk_idx_out.shape[0] < prev_n:
            self._topk_idx_out = torch.empty(prev_n, dtype=torch.int32, device=router_logits.device)
        topk_idx_out = self._topk_idx_out
        topk_idx_out[num_tokens:prev_n].fill_(-1)
        return topk_idx_out

    def forward(self, hidden_states, router_logits, shared_output):
        num_tokens = hidden_states.shape[0]
        self.select_experts(router_logits, num_tokens, num_tokens)
        final_hidden_states = self._workspace(num_tokens, hidden_states.device)
        final_hidden_states.copy_(hidden_states)
        final_hidden_states += shared_output
        return final_hidden_states


class ModelRunner{i}:
    def __init__(self, hidden_size):
        self.moe = FusedMoE{i}(hidden_size)

    @contextlib.contextmanager
    def _autotune_context(self):
        with torch.inference_mode():
            yield

    def _dummy_run(self, batch_size, run_ctx=None):
        x = torch.zeros(batch_size, self.moe.hidden_size)

        def run_once():
            return self.moe.forward(x, x, x)

        with run_ctx or torch.inference_mode():
            run_once()

    def kernel_warmup(self):
        with self._autotune_context():
            self._dummy_run(8)


def serve_{i}(runner, batch):
    with torch.no_grad():
        return runner.moe.forward(batch, batch, batch)
'''


def generate(size_bytes: int) -> str:
    parts = ["import contextlib\nimport torch\n"]
    total, i = len(parts[0]), 0
    while total < size_bytes:
        block = BLOCK.format(i=i)
        parts.append(block)
        total += len(block)
        i += 1
    return "".join(parts)


def measure(path: str, max_bytes: int) -> tuple[float, int, str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("GRADMODE_CACHE_DIR", None)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "lints", path, "--no-cache", "-j", "1", "--format", "concise",
                             "--max-file-size", str(max_bytes)], cwd=os.path.dirname(path), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed = time.perf_counter() - start
    return elapsed, usage.ru_maxrss, err.strip().splitlines()[-1] if err.strip() else ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="0.5,1,2,5", help="sizes in MB")
    args = parser.parse_args()
    print("| size | lines | seconds | s/MB | peak RSS (MiB) | summary line |")
    print("|---|---|---|---|---|---|")
    for size in (float(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            open(os.path.join(folder, "pyproject.toml"), "w").close()
            path = os.path.join(folder, "big_module.py")
            text = generate(int(size * 1024 * 1024))
            with open(path, "w") as handle:
                handle.write(text)
            # one child per size: RUSAGE_CHILDREN's peak is the largest so far, so run each in a fresh process
            elapsed, rss_kb, summary = _isolated(path, len(text) + 1)
            print(f"| {size} MB | {text.count(chr(10))} | {elapsed:.2f} | {elapsed / size:.2f} | "
                  f"{rss_kb / 1024:.0f} | {summary} |")
    return 0


def _isolated(path: str, max_bytes: int) -> tuple[float, int, str]:
    """Run ``measure`` in a fresh Python so the peak RSS is this run's alone."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); import big_files; "
            f"r = big_files.measure({path!r}, {max_bytes}); print(repr(r))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return ast.literal_eval(out.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
