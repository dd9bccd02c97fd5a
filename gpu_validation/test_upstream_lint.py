"""CPU (runs in CI): the linter and the codemod on the REAL upstream SGLang files, compared with the upstream fix.

sglang 0.5.15 (bug, upstream issue sgl-project/sglang#33470) and 0.5.23 (fix, from PR #33788: "remove
``torch.inference_mode()`` from the FlashInfer autotune context and shared dummy warmup forward without adding
an explicit ``torch.no_grad()`` context"), as fetched by fetch_upstream.py. The two sites:

* ``flashinfer_autotune.py``, ``flashinfer_autotune_context``:
  ``with torch.inference_mode(), autotune(True, cache=str(autotune_cache)), maybe_skip_logits: yield``
* ``base_runner.py``, ``BaseRunner._dummy_run``: ``with torch.inference_mode(), run_ctx or empty_context(): run_once()``

Copies are linted and rewritten in a temp dir with ``python -m lints PATH --format json`` and
``python -m lints.codemod PATH`` (no pyproject.toml there, so the linter's defaults apply). What is compared
with 0.5.23, exactly (``ast.dump`` equality, so formatting and comments do not count):

* dummy-run site: the whole ``with`` statement around ``run_once()`` (items and body) after the codemod equals
  0.5.23's. The enclosing ``with forward_context(ForwardContext(attn_backend=mr.attn_backend))`` equals
  0.5.15's; 0.5.23 adds the keyword ``forward_batch=forward_batch`` to that call (an unrelated change), checked
  to be the only difference there.
* autotune site: 0.5.23 rewrote the whole ``with`` (five items), so what is compared is: the codemod's with-items
  equal 0.5.15's with-items minus its first, ``torch.inference_mode()``; the body is a bare ``yield`` in all
  three; the enclosing ``with torch.get_device_module(mr.device).stream(mr.forward_stream):`` is the same in all
  three; around the ``yield`` no grad-mode context (``inference_mode``, ``no_grad``, ``enable_grad``,
  ``set_grad_enabled``) is entered in the codemod's output or in 0.5.23, and 0.5.15 entered exactly one,
  ``torch.inference_mode()``; both keep ``autotune(True, cache=...)`` (same positional argument; 0.5.23 adds
  ``skip_ops`` and passes ``cache=None`` when it loads and saves the cache by hand).
* both files: no ``inference_mode`` left anywhere after the codemod, as in 0.5.23; the codemod changed exactly
  one line in each file and added no ``torch.no_grad()`` (neither did the upstream fix).
"""
from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest

from gpu_validation import sglang_upstream as su

# The sglang wheels (~52 MB) are fetched on first use: part of the full suite, not the quick one.
pytestmark = pytest.mark.slow

GRAD_MODE_NAMES = {"inference_mode", "no_grad", "enable_grad", "set_grad_enabled"}
SITES = {  # file key -> (function qualname, what the with wraps, the 0.5.15 line, the line after the codemod)
    "flashinfer_autotune": ("flashinfer_autotune_context", "yield",
                            "with torch.inference_mode(), autotune(", "with autotune("),
    "base_runner": ("BaseRunner._dummy_run", "run_once()",
                    "with torch.inference_mode(), run_ctx or empty_context():", "with run_ctx or empty_context():"),
}
MEMBERS = {"flashinfer_autotune": su.FA_MEMBER, "base_runner": su.BR_MEMBER}


def _dump(node) -> str:
    return ast.dump(node)


def _items(with_node: ast.With) -> list[str]:
    return [_dump(item) for item in with_node.items]


def _function(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    scope = tree.body
    for part in qualname.split("."):
        node = next(n for n in scope if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part)
        scope = node.body
    return node


def _is_target(stmt: ast.stmt, target: str) -> bool:
    if not isinstance(stmt, ast.Expr):
        return False
    if target == "yield":
        return isinstance(stmt.value, ast.Yield)
    return isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name) and \
        f"{stmt.value.func.id}()" == target


def _with_chain(func: ast.FunctionDef, target: str) -> list[ast.With]:
    """The ``with`` statements enclosing the target statement, outermost first (the last one holds it)."""
    def walk(body, chain):
        for stmt in body:
            if _is_target(stmt, target):
                return chain
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], (ast.stmt, ast.excepthandler)):
                    found = walk(inner, chain + [stmt] if isinstance(stmt, ast.With) else chain)
                    if found is not None:
                        return found
        return None
    chain = walk(func.body, [])
    assert chain, f"no `with` around {target} in {func.name}"
    return chain


def _call_name(expr) -> str:
    node = expr.func if isinstance(expr, ast.Call) else expr
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _grad_mode_items(chain: list[ast.With]) -> list[str]:
    return [_call_name(item.context_expr) for w in chain for item in w.items
            if isinstance(item.context_expr, ast.Call) and _call_name(item.context_expr).split(".")[-1]
            in GRAD_MODE_NAMES]


def _grad_mode_uses(node) -> list[str]:
    return sorted({n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
                   if (isinstance(n, ast.Attribute) and n.attr in GRAD_MODE_NAMES)
                   or (isinstance(n, ast.Name) and n.id in GRAD_MODE_NAMES)})


@pytest.fixture(scope="module")
def files(upstream_files, tmp_path_factory):
    """{key: {"0.5.15": path of a copy, "codemod": path, "0.5.23": path}} plus the lint reports."""
    tmp = tmp_path_factory.mktemp("upstream-lint")
    before_dir = tmp / "sglang-0.5.15"
    before_dir.mkdir()
    for key, member in MEMBERS.items():
        (before_dir / Path(member).name).write_bytes(su.upstream_path(su.BUGGY, member).read_bytes())
    before = su.lint_json(before_dir)
    rewritten = su.codemod_copies(tmp)
    after = su.lint_json(rewritten["flashinfer_autotune"], rewritten["base_runner"])
    fixed = su.lint_json(*(su.upstream_path(su.FIXED, m) for m in MEMBERS.values()))
    out = {key: {"0.5.15": before_dir / Path(member).name, "codemod": rewritten[key],
                 "0.5.23": su.upstream_path(su.FIXED, member)} for key, member in MEMBERS.items()}
    out["reports"] = {"0.5.15": before, "codemod": after, "0.5.23": fixed}
    out["codemod_output"] = rewritten["codemod_output"]
    return out


def _trees(files, key) -> dict[str, ast.Module]:
    return {v: ast.parse(Path(p).read_text()) for v, p in files[key].items()}


def _gm1(report) -> list[dict]:
    return [f for f in report["findings"] if f["code"].startswith("GM1")]


def test_linter_flags_both_sites_in_0_5_15(files, capsys):
    findings = _gm1(files["reports"]["0.5.15"])
    by_file: dict[str, set] = {}
    for f in findings:
        by_file.setdefault(Path(f["path"]).stem, set()).add(f["line"])
    expected = {}
    for key, (qualname, target, bad_line, _) in SITES.items():
        source = files[key]["0.5.15"].read_text().splitlines()
        expected[key] = {i + 1 for i, line in enumerate(source) if line.strip().startswith(bad_line)}
        assert len(expected[key]) == 1, (key, expected[key])
    assert by_file == expected, f"GM1xx findings at {by_file}, expected exactly at the two sites {expected}"
    assert {f["code"] for f in findings} >= {"GM101"}
    with capsys.disabled():
        for f in findings:
            print(f"\n  [sglang 0.5.15 {Path(f['path']).name}:{f['line']}: {f['code']} {f['message'][:110]}...]",
                  end="")
        print()


def test_codemod_leaves_no_gm1_findings_and_changes_one_line_per_file(files, capsys):
    assert not _gm1(files["reports"]["codemod"]), _gm1(files["reports"]["codemod"])
    for key, (_, _, bad_line, good_line) in SITES.items():
        before = files[key]["0.5.15"].read_text().splitlines()
        after = files[key]["codemod"].read_text().splitlines()
        diff = list(difflib.unified_diff(before, after, lineterm="", n=0))
        removed = [line[1:].strip() for line in diff if line.startswith("-") and not line.startswith("---")]
        added = [line[1:].strip() for line in diff if line.startswith("+") and not line.startswith("+++")]
        assert removed == [bad_line] and added == [good_line], (key, removed, added)
        assert "inference_mode" not in files[key]["codemod"].read_text()
        assert "no_grad" not in files[key]["codemod"].read_text()  # nothing added, as upstream
    with capsys.disabled():
        print(f"\n  [codemod: {files['codemod_output'].strip()}; re-lint: "
              f"{len(files['reports']['codemod']['findings'])} finding(s)]")


def test_0_5_23_files_lint_clean(files):
    assert not _gm1(files["reports"]["0.5.23"]), _gm1(files["reports"]["0.5.23"])
    for key in SITES:
        assert "inference_mode" not in files[key]["0.5.23"].read_text()


def test_dummy_run_site_after_codemod_equals_0_5_23(files):
    trees = _trees(files, "base_runner")
    qualname, target, _, _ = SITES["base_runner"]
    chains = {v: _with_chain(_function(t, qualname), target) for v, t in trees.items()}
    inner = {v: c[-1] for v, c in chains.items()}
    assert _dump(inner["codemod"]) == _dump(inner["0.5.23"]), "the with around run_once() differs from 0.5.23"
    assert [_dump(i) for i in inner["codemod"].items] == [_dump(i) for i in inner["0.5.15"].items[1:]]
    assert _call_name(inner["0.5.15"].items[0].context_expr) == "torch.inference_mode"
    assert _grad_mode_items(chains["0.5.15"]) == ["torch.inference_mode"]
    assert _grad_mode_items(chains["codemod"]) == _grad_mode_items(chains["0.5.23"]) == []
    # The enclosing `with forward_context(...)`: the codemod keeps 0.5.15's; 0.5.23 only adds forward_batch=.
    outer = {v: c[-2] for v, c in chains.items()}
    assert _items(outer["codemod"]) == _items(outer["0.5.15"])
    call_c, call_23 = outer["codemod"].items[0].context_expr, outer["0.5.23"].items[0].context_expr
    assert _dump(call_c.func) == _dump(call_23.func)
    assert [_dump(a) for a in call_c.args] == [_dump(a) for a in call_23.args]
    assert [_dump(k) for k in call_23.keywords[:-1]] == [_dump(k) for k in call_c.keywords] == []
    assert ast.unparse(call_23.keywords[-1]) == "forward_batch=forward_batch"
    for v in ("codemod", "0.5.23"):
        assert _grad_mode_uses(_function(trees[v], qualname)) == [], v


def test_autotune_context_after_codemod_matches_0_5_23(files):
    trees = _trees(files, "flashinfer_autotune")
    qualname, target, _, _ = SITES["flashinfer_autotune"]
    chains = {v: _with_chain(_function(t, qualname), target) for v, t in trees.items()}
    inner = {v: c[-1] for v, c in chains.items()}
    # The codemod removed exactly the first with-item, torch.inference_mode(), and nothing else.
    assert _call_name(inner["0.5.15"].items[0].context_expr) == "torch.inference_mode"
    assert [_dump(i) for i in inner["codemod"].items] == [_dump(i) for i in inner["0.5.15"].items[1:]]
    # The body is a bare `yield` in all three.
    assert {v: [_dump(s) for s in w.body] for v, w in inner.items()} == \
        {v: [_dump(ast.Expr(ast.Yield()))] for v in inner}
    # The enclosing `with torch.get_device_module(mr.device).stream(mr.forward_stream):` is unchanged.
    outer_items = {v: _items(c[-2]) for v, c in chains.items()}
    assert outer_items["codemod"] == outer_items["0.5.15"] == outer_items["0.5.23"], outer_items
    assert [ast.unparse(i) for i in chains["0.5.23"][-2].items] == [
        "torch.get_device_module(mr.device).stream(mr.forward_stream)"]
    # Grad-mode contexts entered around the yield: 0.5.15 one, the codemod's output and 0.5.23 none.
    assert _grad_mode_items(chains["0.5.15"]) == ["torch.inference_mode"]
    assert _grad_mode_items(chains["codemod"]) == _grad_mode_items(chains["0.5.23"]) == []
    for v in ("codemod", "0.5.23"):
        assert _grad_mode_uses(_function(trees[v], qualname)) == [], v
        assert _grad_mode_uses(_function(trees[v], "run_flashinfer_autotune_forward")) == [], v
    # Both keep FlashInfer's autotune(True, cache=...) as a with-item.
    autotune = {v: next(i.context_expr for i in inner[v].items if _call_name(i.context_expr) == "autotune")
                for v in inner}
    assert [_dump(a) for a in autotune["codemod"].args] == [_dump(a) for a in autotune["0.5.23"].args] == \
        [_dump(ast.Constant(True))]
    assert [k.arg for k in autotune["codemod"].keywords] == ["cache"]
    assert [k.arg for k in autotune["0.5.23"].keywords] == ["cache", "skip_ops"]
    assert [_call_name(i.context_expr) for i in inner["0.5.23"].items] == [
        "_autotune_process_group", "autotune", "autotune_v2", "mega_context", "autotune_dummy_run_mode"]
