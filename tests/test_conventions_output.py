"""Issue 33's conventions and output: `--select GM` means the default rules in flake8 as in the CLI,
the frictions a new user meets (hints, signatures, stdout of a diff, error positions, an empty folder,
explain, --help, --output-format), the why-chain as structure in SARIF and JSON, and README snippets
that work on the repository as delivered."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lints.cli import build_parser
from lints.model import FileError
from lints.output import chain_of, explain, render_sarif
from lints.rules import ALL_RULES, OPT_IN_CODES

from .helpers import FIXTURES, ROOT, run_module, write_package
from .helpers import run_script as script

BUGGY = FIXTURES / "lint" / "sglang_buggy.py"
FINDING = re.compile(r"(?:\./)?(?P<path>\S+?):(?P<line>\d+):(?P<col>\d+): (?P<code>GM\d+) ")
WARM = ("import torch\n"
        "def warmup(model):\n"
        "    with torch.inference_mode():\n"
        "        model()\n")


def buggy_project(tmp_path: Path, settings: str = "") -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    shutil.copy(BUGGY, root / "b.py")
    (root / "pyproject.toml").write_text(settings)
    return root


def found(proc) -> set[tuple[int, int, str]]:
    """(line, column, code) of the GM findings a CLI or flake8 run printed."""
    return {(int(m["line"]), int(m["col"]), m["code"])
            for m in map(FINDING.match, proc.stdout.splitlines()) if m}


# --- 1. `flake8 --select GM` and the CLI's default -------------------------------------------------

def test_select_gm_gives_the_default_findings_in_flake8_and_the_cli(tmp_path):
    """The README spells the plugin `flake8 --select GM`; flake8 lets an explicit select beat a plugin's
    default ignore, so the opt-in GM201 came on there (43 findings for the CLI's 5 on sglang)."""
    assert OPT_IN_CODES == {"GM201"}  # what "opt-in" means below
    root = buggy_project(tmp_path)
    default = found(run_module("lints", "b.py", cwd=root))
    assert {code for *_, code in default} == {"GM101", "GM103", "GM202"}
    assert found(run_module("lints", "--select", "GM", "b.py", cwd=root)) == default
    assert found(run_module("flake8", "--select", "GM", "b.py", cwd=root)) == default
    assert found(run_module("flake8", "--extend-ignore", "E,W", "b.py", cwd=root)) == default


@pytest.mark.parametrize("front_end", [["lints"], ["flake8", "--extend-ignore", "E,W"]])
@pytest.mark.parametrize("naming", [["--select", "GM201"], pytest.param(["--select", "GM2"], marks=pytest.mark.slow),
                                    pytest.param(["--extend-select", "GM201"], marks=pytest.mark.slow)])
def test_an_opt_in_rule_runs_when_a_code_narrower_than_the_family_names_it(tmp_path, front_end, naming):
    root = buggy_project(tmp_path)
    codes = {code for *_, code in found(run_module(*front_end, *naming, "b.py", cwd=root))}
    assert "GM201" in codes
    assert ("GM101" in codes) == (naming[0] == "--extend-select")  # --select starts over, in both


def test_flake8_shows_the_opt_in_rule_the_projects_settings_turn_on(tmp_path):
    """flake8's default ignore of GM201 hid it from a plain `flake8` run even where [tool.gradmode]
    selects it; now the plugin alone decides, as the CLI does."""
    root = buggy_project(tmp_path, '[tool.gradmode]\nextend-select = ["GM201"]\n')
    cli = found(run_module("lints", "b.py", cwd=root))
    assert "GM201" in {code for *_, code in cli}
    assert found(run_module("flake8", "--extend-ignore", "E,W", "b.py", cwd=root)) == cli
    assert found(run_module("flake8", "--select", "GM", "b.py", cwd=root)) == cli


# --- 2. Small frictions ----------------------------------------------------------------------------

def test_the_summary_points_to_fix_under_the_name_the_tool_was_started_by(tmp_path):
    root = buggy_project(tmp_path)
    by_script = script("gradmode-lint", "b.py", cwd=root)
    assert "2 fixable with `gradmode-lint --fix`" in by_script.stderr, by_script.stderr
    by_module = run_module("lints", "b.py", cwd=root)
    assert "2 fixable with `python -m lints --fix`" in by_module.stderr, by_module.stderr
    assert "lints.codemod" not in by_script.stderr + by_module.stderr


def test_help_names_the_program_as_it_was_started(tmp_path):
    for proc, usage in ((script("gradmode-lint", "--help", cwd=tmp_path), "usage: gradmode-lint "),
                        (script("gradmode-fix", "--help", cwd=tmp_path), "usage: gradmode-fix "),
                        (run_module("lints", "--help", cwd=tmp_path), "usage: python -m lints "),
                        (run_module("lints.codemod", "--help", cwd=tmp_path), "usage: python -m lints.codemod ")):
        assert proc.returncode == 0 and proc.stdout.startswith(usage), proc.stdout[:200]
    assert "`gradmode-lint explain GM101`" in script("gradmode-lint", "--help", cwd=tmp_path).stdout


def test_the_linters_diff_is_signed_by_the_linter(tmp_path):
    root = buggy_project(tmp_path)
    proc = script("gradmode-lint", "--diff", "b.py", cwd=root)
    assert proc.returncode == 1 and proc.stdout.startswith("--- a/b.py\n"), proc
    assert "gradmode-lint: 1 file(s) scanned, 1 would change" in proc.stderr, proc.stderr
    assert "gradmode-fix" not in proc.stderr


def test_the_codemods_diff_is_the_patch_alone_on_stdout(tmp_path):
    root = buggy_project(tmp_path)
    proc = script("gradmode-fix", "--diff", "b.py", cwd=root)
    assert proc.returncode == 1, proc
    assert proc.stdout.startswith("--- a/b.py\n+++ b/b.py\n@@ ")
    assert all(line[:1] in " +-@\\" for line in proc.stdout.splitlines()), proc.stdout
    # the findings the fixes leave (GM202 is report only) come beside it, with the summary
    assert "b.py:16:13: GM202 " in proc.stderr and "2 finding(s) left" in proc.stderr, proc.stderr
    patched = subprocess.run(["patch", "-p1", "--dry-run"], cwd=root, input=proc.stdout, capture_output=True,
                             text=True) if shutil.which("patch") else None
    assert patched is None or patched.returncode == 0, patched


def test_a_syntax_error_gets_its_line_and_column_in_every_format(tmp_path):
    root = buggy_project(tmp_path)
    (root / "broken.py").write_text("x = 1\ndef warmup(:\n    pass\n")
    (root / "latin.py").write_bytes(b"s = '\xff'\n")  # an error with no position: cannot decode
    data = json.loads(run_module("lints", "--format", "json", ".", cwd=root).stdout)
    errors = {e["path"]: e for e in data["errors"]}
    assert (errors["broken.py"]["line"], errors["broken.py"]["col"]) == (2, 12), errors
    assert errors["broken.py"]["message"].startswith("syntax error at line 2, column 12")
    assert (errors["latin.py"]["line"], errors["latin.py"]["col"]) == (None, None), errors
    sarif = json.loads(run_module("lints", "--format", "sarif", ".", cwd=root).stdout)
    notes = {n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: n["locations"][0]["physicalLocation"]
             for n in sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]}
    assert notes["broken.py"]["region"] == {"startLine": 2, "startColumn": 12} and "region" not in notes["latin.py"]
    github = run_module("lints", "--format", "github", ".", cwd=root).stdout
    assert "::error title=gradmode-lint,file=broken.py,line=2,col=12::syntax error" in github, github


def test_the_position_of_a_file_error_is_read_only_from_a_syntax_error():
    assert FileError("a.py", "syntax error at line 3, column 7: invalid syntax").position == (3, 7)
    assert FileError("a.py", "syntax error at line 3, column None: unexpected EOF").position == (3, None)
    assert FileError("a.py", "cannot read: line 3, column 7").position == (None, None)


def test_an_empty_folder_says_no_python_files_were_found_and_exits_0(tmp_path):
    """As ruff's `warning: No Python files found under the given path(s)`: a clean result over nothing
    must not pass unseen; like ruff's, --quiet hides it and the exit status stays 0."""
    (tmp_path / "empty").mkdir()
    proc = script("gradmode-lint", "empty", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "", proc
    assert "gradmode-lint: warning: no Python files found under the given path(s)" in proc.stderr.splitlines()
    quiet = script("gradmode-lint", "-q", "empty", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet
    write_package(tmp_path / "full", {"eng/warm.py": WARM})
    linted = script("gradmode-lint", "full", cwd=tmp_path)
    assert linted.returncode == 1 and "no Python files" not in linted.stderr, linted


def test_explain_shows_the_examples_without_the_test_markers():
    for code, rule in ALL_RULES.items():
        page = explain(code)
        assert "expect:" not in page, (code, page)
        assert any("# expect:" in source for example in rule.INVALID
                   for source in (example.values() if isinstance(example, dict) else [example]))  # they had some
    # the example's own line, cut only of its marker
    assert "            with torch.inference_mode():\n" in explain("GM101")


def test_output_format_is_accepted_as_rufs_name_for_format(tmp_path):
    for spelling in (["--output-format", "sarif"], ["--output-format=sarif"], ["--format", "sarif"]):
        assert build_parser().parse_args([*spelling, "x.py"]).format == "sarif"
    root = buggy_project(tmp_path)
    proc = run_module("lints", "--output-format", "json", "b.py", cwd=root)
    assert proc.returncode == 1 and json.loads(proc.stdout)["findings"][0]["code"] == "GM202", proc


# --- 3. The why-chain as structure -----------------------------------------------------------------

def test_json_findings_carry_the_chain_as_places(tmp_path):
    root = buggy_project(tmp_path)
    data = json.loads(run_module("lints", "--format", "json", "b.py", cwd=root).stdout)
    first = data["findings"][0]
    assert (first["code"], first["line"], first["col"]) == ("GM202", 16, 13)
    chain = first["chain"]
    assert all(set(step) == {"path", "line", "column", "message"} for step in chain)
    assert chain[0] == {"path": "b.py", "line": 16, "column": 13,
                        "message": "buffer: allocated under a check of `self._final_hidden_states`, b.py:16"}
    assert {"path": "b.py", "line": 30, "column": None,
            "message": "updated in place: `.copy_()` in `FlashInferFusedMoE.forward()` at b.py:30"} in chain
    # an inference-mode region entered through a helper names the helper's line first: the step is the call
    region = next(step for step in chain if step["message"].startswith("allocated under inference mode:"))
    assert region["line"] == 54 and "b.py:40" in region["message"]
    # the text stays beside it, in the same order; a note that names no place (the full message) is no step
    messages = [step["message"] for step in chain]
    assert [note.strip() for note in first["notes"] if note.strip() in messages] == messages
    assert first["notes"][0].endswith("updated in place outside it") and first["notes"][0] not in messages
    gm101 = next(f for f in data["findings"] if f["code"] == "GM101")
    assert gm101["notes"] and gm101["chain"] == []


def test_the_chain_keeps_paths_with_spaces_and_points_at_real_lines(tmp_path):
    """The notes are text (the rules, the analyses and the results cache keep them so): the places
    read back from them must be whole paths, spaces included, to lines that exist."""
    write_package(tmp_path / "my repo", {
        "eng/pool.py": "import torch\n_BUF = None\ndef get_buf(x):\n    global _BUF\n    if _BUF is None:\n"
                       "        _BUF = torch.empty_like(x)\n    return _BUF\n",
        "eng/kernels.py": "from eng.pool import get_buf\ndef fused_op(x):\n    get_buf(x).copy_(x)\n",
        "eng/server.py": "import torch\nfrom eng.kernels import fused_op\nclass Engine:\n"
                         "    @torch.inference_mode()\n    def generate(self, x):\n        fused_op(x)\n"
                         "    @torch.no_grad()\n    def execute_model(self, x):\n        fused_op(x)\n"})
    data = json.loads(run_module("lints", "--format", "json", "my repo", cwd=tmp_path).stdout)
    (finding,) = [f for f in data["findings"] if f["code"] == "GM202"]
    paths = {step["path"] for step in finding["chain"]}
    assert paths == {"my repo/eng/pool.py", "my repo/eng/server.py", "my repo/eng/kernels.py"}, finding["chain"]
    for step in finding["chain"]:
        lines = (tmp_path / step["path"]).read_text().splitlines()
        assert 1 <= step["line"] <= len(lines), step


def test_chain_of_reads_each_kind_of_note():
    from lints.model import Finding

    finding = Finding("a b/w.py", 5, 4, "GM202", "m", notes=(
        "`x` allocated under inference mode, updated in place outside it",  # the full message: no place
        "buffer: allocated under a check of `x`, a b/w.py:5",
        "allocated under inference mode: `h()` (enters `torch.inference_mode()`, a b/h.py:9) in `f()` at a b/w.py:2",
        "  `f()` calls `g()` at /abs/k.py:3",
        "called from `f()` at w.py:7 (reached from `warmup()`: name `warmup` matches `*warmup*`)",
        "name `warmup` matches `*warmup*`",
        "fix: drop the inference mode at a b/w.py:2 (let the caller's grad mode decide), or allocate under it"))
    assert [(s["path"], s["line"], s["column"], s["nested"]) for s in chain_of(finding)] == [
        ("a b/w.py", 5, 5, False), ("a b/w.py", 2, None, False), ("/abs/k.py", 3, None, True),
        ("w.py", 7, None, False), ("a b/w.py", 2, None, False)]


# SARIF 2.1.0 (OASIS), the objects this tool writes: required properties, the properties allowed (the
# schema forbids others: additionalProperties false) and the kind of each that is itself an object.
SARIF_OBJECTS = {
    "result": ({"message"}, {"ruleId": None, "ruleIndex": None, "level": None, "message": "message",
                             "locations": ["location"], "codeFlows": ["codeFlow"],
                             "relatedLocations": ["location"], "fixes": ["fix"]}),
    "message": (set(), {"text": None}),
    "location": (set(), {"id": None, "physicalLocation": "physicalLocation", "message": "message"}),
    "physicalLocation": (set(), {"artifactLocation": "artifactLocation", "region": "region"}),
    "artifactLocation": (set(), {"uri": None}),
    "region": (set(), {"startLine": None, "startColumn": None, "endLine": None, "endColumn": None}),
    "codeFlow": ({"threadFlows"}, {"threadFlows": ["threadFlow"]}),
    "threadFlow": ({"locations"}, {"locations": ["threadFlowLocation"]}),
    "threadFlowLocation": (set(), {"location": "location", "nestingLevel": None}),
    "fix": ({"artifactChanges"}, {"description": "message", "artifactChanges": ["artifactChange"],
                                  "properties": None}),
    "artifactChange": ({"artifactLocation", "replacements"},
                       {"artifactLocation": "artifactLocation", "replacements": ["replacement"]}),
    "replacement": ({"deletedRegion"}, {"deletedRegion": "region", "insertedContent": "artifactContent"}),
    "artifactContent": (set(), {"text": None}),
}
# arrays the schema gives "minItems": 1
SARIF_NON_EMPTY = {"threadFlows", "locations", "artifactChanges", "replacements"}


def check_sarif(obj, kind: str, where: str = "result") -> None:
    required, allowed = SARIF_OBJECTS[kind]
    assert isinstance(obj, dict), where
    assert required <= obj.keys() and obj.keys() <= allowed.keys(), (where, sorted(obj))
    if kind == "message":
        assert isinstance(obj["text"], str) and obj["text"], where
    if kind == "region":  # 1-based; an end is never before its start
        assert all(isinstance(v, int) and v >= 1 for v in obj.values()) and "startLine" in obj, (where, obj)
        if "endLine" in obj:
            assert (obj["endLine"], obj.get("endColumn", 1 << 30)) >= (obj["startLine"], obj.get("startColumn", 1))
    if kind == "location" and "id" in obj:
        assert isinstance(obj["id"], int) and obj["id"] >= -1, where
    if kind == "threadFlowLocation" and "nestingLevel" in obj:
        assert isinstance(obj["nestingLevel"], int) and obj["nestingLevel"] >= 0, where
    for key, sub in allowed.items():
        if key not in obj or sub is None:
            continue
        if isinstance(sub, list):
            assert isinstance(obj[key], list), (where, key)
            assert obj[key] or key not in SARIF_NON_EMPTY, (where, key)
            for i, item in enumerate(obj[key]):
                check_sarif(item, sub[0], f"{where}.{key}[{i}]")
        else:
            check_sarif(obj[key], sub, f"{where}.{key}")


def test_sarif_results_carry_the_chain_end_positions_and_fixes(tmp_path):
    root = buggy_project(tmp_path)
    proc = run_module("lints", "--format", "sarif", "b.py", cwd=root)
    json_data = json.loads(run_module("lints", "--format", "json", "b.py", cwd=root).stdout)
    (run,) = json.loads(proc.stdout)["runs"]
    results = run["results"]
    for i, result in enumerate(results):
        check_sarif(result, "result", f"results[{i}]")
    for result, finding in zip(results, json_data["findings"]):
        region = result["locations"][0]["physicalLocation"]["region"]
        assert (region["startLine"], region["startColumn"], region["endLine"], region["endColumn"]) == (
            finding["line"], finding["col"], finding["end_line"], finding["end_col"])
        steps = [(s["path"], s["line"], s["message"]) for s in finding["chain"]]
        if not steps:
            assert "codeFlows" not in result and "relatedLocations" not in result
            continue
        (flow,) = result["codeFlows"]
        (thread,) = flow["threadFlows"]
        assert [(tl["location"]["physicalLocation"]["artifactLocation"]["uri"],
                 tl["location"]["physicalLocation"]["region"]["startLine"],
                 tl["location"]["message"]["text"]) for tl in thread["locations"]] == steps
        # the calls under a step are one level deeper, as the text indents them
        assert [tl["nestingLevel"] for tl in thread["locations"]] == [
            1 if note.startswith("  ") else 0 for note in finding["notes"] if note.strip() in {s[2] for s in steps}]
        assert [loc["id"] for loc in result["relatedLocations"]] == list(range(1, len(steps) + 1))
    gm202 = results[0]
    assert gm202["ruleId"] == "GM202" and len(gm202["codeFlows"][0]["threadFlows"][0]["locations"]) >= 5
    assert "fixes" not in gm202  # report only
    gm101 = next(r for r in results if r["ruleId"] == "GM101")
    (fix,) = gm101["fixes"]
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "b.py" and fix["properties"]["applicability"] == "safe"
    fixed = apply_replacements((root / "b.py").read_text(), change["replacements"])
    assert fixed.count("inference_mode()") == (root / "b.py").read_text().count("inference_mode()") - 1
    compile(fixed, "b.py", "exec")


def apply_replacements(text: str, replacements: list[dict]) -> str:
    """SARIF replacements (1-based lines and columns, end exclusive) applied from the last one up."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    for r in sorted(replacements, key=lambda r: (r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"]),
                    reverse=True):
        d = r["deletedRegion"]
        start, end = offset(d["startLine"], d["startColumn"]), offset(d["endLine"], d["endColumn"])
        text = text[:start] + r.get("insertedContent", {}).get("text", "") + text[end:]
    return text


def test_a_sarif_log_with_no_details_still_has_its_chain():
    """``render_sarif`` without end positions or fixes (a caller with no source at hand)."""
    from lints.model import Finding

    finding = Finding("w.py", 3, 4, "GM202", "m", "error", notes=("buffer: x, w.py:3", "  `f()` calls `g()` at k.py:9"))
    (result,) = json.loads(render_sarif([finding], []))["runs"][0]["results"]
    check_sarif(result, "result")
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 3, "startColumn": 5}
    assert [tl["nestingLevel"] for tl in result["codeFlows"][0]["threadFlows"][0]["locations"]] == [0, 1]


@pytest.mark.skipif(not os.environ.get("GRADMODE_SARIF_SCHEMA"),
                    reason="set GRADMODE_SARIF_SCHEMA to a local copy of sarif-schema-2.1.0.json (never downloaded)")
def test_sarif_validates_against_the_schema_file_given(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(Path(os.environ["GRADMODE_SARIF_SCHEMA"]).read_text())
    if "$ref" not in schema and "Root" in schema.get("definitions", {}):  # a copy that keeps the root apart
        schema = dict(schema, **{"$ref": "#/definitions/Root"})
    root = buggy_project(tmp_path)
    (root / "broken.py").write_text("def warmup(:\n")
    log = json.loads(run_module("lints", "--format", "sarif", ".", cwd=root).stdout)
    assert any("codeFlows" in r for r in log["runs"][0]["results"])
    jsonschema.Draft7Validator(schema).validate(log)


# --- 4. README snippets that work on the repository as delivered -----------------------------------

def readme_revs() -> tuple[list[str], list[str]]:
    readme = (ROOT / "README.md").read_text()
    return (re.findall(r"^\s*rev:\s*(\S+)", readme, re.MULTILINE),
            re.findall(r"git\+https://\S+?@([0-9A-Za-z._-]+)'", readme))


def test_readme_pins_one_revision_for_pip_and_pre_commit():
    pre_commit, pip = readme_revs()
    assert len(pre_commit) == 1 and len(pip) == 2 and set(pip) == set(pre_commit), (pre_commit, pip)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_readme_revision_is_a_commit_of_this_repository_with_the_hooks():
    (rev,), _ = readme_revs()
    git = lambda *args: subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)  # noqa: E731
    if not re.fullmatch(r"[0-9a-f]{40}", rev):  # a release tag, once there are some
        tags = git("tag", "--list").stdout.split()
        if not tags:
            pytest.skip("this clone has no tags at all (fetched without them)")
        assert rev in tags, tags
    elif git("cat-file", "-e", f"{rev}^{{commit}}").returncode != 0:
        assert git("rev-parse", "--is-shallow-repository").stdout.strip() == "true", f"{rev} is no commit here"
        pytest.skip("a shallow clone without the pinned commit")
    assert git("cat-file", "-e", f"{rev}:.pre-commit-hooks.yaml").returncode == 0, "the hooks are not at that commit"
    assert git("cat-file", "-e", f"{rev}:pyproject.toml").returncode == 0  # pip builds it from there


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_readme_pre_commit_snippet_runs_with_this_repository_as_its_remote(tmp_path):
    """The README's snippet as a user pastes it, with this checkout standing for the GitHub remote:
    pre-commit fetches the pinned revision and runs the hooks (a tag that is not there failed with
    `pathspec 'v0.2.0' did not match`)."""
    pytest.importorskip("pre_commit")
    readme = (ROOT / "README.md").read_text()
    snippet = re.search(r"```yaml\n(- repo: .*?)```", readme, re.DOTALL).group(1)
    snippet = re.sub(r"(?m)^- repo: \S+", f"- repo: {ROOT.as_uri()}", snippet)
    repo = tmp_path / "user"
    write_package(repo, {"eng/warm.py": WARM})
    (repo / ".pre-commit-config.yaml").write_text("repos:\n" + snippet)
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "home"), GIT_CONFIG_NOSYSTEM="1")
    for args in (["init", "-q"], ["add", "."]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    proc = subprocess.run([sys.executable, "-m", "pre_commit", "run", "gradmode-lint", "--all-files"], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=900)
    assert "did not match" not in proc.stdout + proc.stderr, proc
    assert proc.returncode == 1 and "eng/warm.py:3:10: GM101 " in proc.stdout, proc
