"""`python -m lints`: formats, exit codes, selection, noqa, explain, config, cache, jobs."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from lints.cache_folders import cache_folder

from lints.options import Config

from .helpers import FIXTURES, ROOT, chdir, write_cache_fact

BUGGY = FIXTURES / "lint" / "sglang_buggy.py"
FIXED = FIXTURES / "lint" / "sglang_fixed.py"


def copy(folder, *sources):
    folder.mkdir(parents=True, exist_ok=True)
    for src in sources:
        shutil.copy(src, folder / src.name)
    return folder


def heads(stdout: str) -> list[str]:
    """The finding lines of the text format (the why-chain notes below each are indented)."""
    return [line for line in stdout.splitlines() if line and not line.startswith(" ")]


def test_exit_codes_and_text_format(tmp_path, run):
    copy(tmp_path, BUGGY)
    proc = run("lints", "sglang_buggy.py")
    assert proc.returncode == 1
    lines = heads(proc.stdout)
    assert [line.split(": ", 1)[1].split()[0] for line in lines] == ["GM202", "GM202", "GM101", "GM103"]
    assert lines[2].startswith("sglang_buggy.py:41:14: GM101 ") and lines[2].endswith(" [*]")
    # each finding is followed by its why-chain
    out = proc.stdout.splitlines()
    assert out[out.index(lines[2]) + 1] == "    name `_flashinfer_autotune_context` matches `*autotune*`"
    assert "4 finding(s) in 1 file(s), 2 fixable with `python -m lints --fix`" in proc.stderr
    assert ("gradmode-lint: serving grad mode: no_grad (inferred: 1 serving root(s) run under no_grad, e.g. `serve()` "
            "enters `torch.no_grad()` at sglang_buggy.py:59)") in proc.stderr.splitlines()
    clean_dir = copy(tmp_path / "clean", FIXED)
    clean = run("lints", "sglang_fixed.py", cwd=clean_dir)
    assert clean.returncode == 0 and clean.stdout == ""
    quiet = run("lints", "-q", "sglang_buggy.py")
    assert quiet.stderr == "" and quiet.returncode == 1


def test_json_format(tmp_path, run):
    copy(tmp_path, BUGGY)
    data = json.loads(run("lints", "--format", "json", ".").stdout)
    assert data["errors"] == []
    assert {(f["code"], f["line"], f["col"]) for f in data["findings"]} == {
        ("GM202", 16, 13), ("GM202", 21, 13), ("GM101", 41, 14), ("GM103", 50, 25)}
    assert {f["severity"] for f in data["findings"] if f["code"] == "GM202"} == {"error"}
    assert data["serving_grad_mode"]["mode"] == "no_grad"
    assert data["serving_grad_mode"]["source"] == "inferred"
    gm202 = [f for f in data["findings"] if f["code"] == "GM202"][0]
    assert "buffer: allocated under a check of `self._final_hidden_states`, sglang_buggy.py:16" in gm202["notes"]
    assert "updated in place: `.copy_()` in `FlashInferFusedMoE.forward()` at sglang_buggy.py:30" in gm202["notes"]
    assert "outside inference mode: `torch.no_grad()` in `serve()` at sglang_buggy.py:59" in gm202["notes"]
    gm101 = [f for f in data["findings"] if f["code"] == "GM101"][0]
    assert gm101["fixable"] == "safe" and gm101["fix"]["applicability"] == "safe"
    assert [(e["location"]["row"], e["end_location"]["row"]) for e in gm101["fix"]["edits"]] == [(41, 42)]
    assert [f["fix"] for f in data["findings"] if f["code"] == "GM202"] == [None, None]  # report only


def test_sarif_format(tmp_path, run):
    copy(tmp_path, BUGGY)
    (tmp_path / "broken.py").write_text("def warmup(:\n  inference_mode\n")
    proc = run("lints", "--format", "sarif", ".")
    assert proc.returncode == 2
    sarif = json.loads(proc.stdout)
    assert sarif["version"] == "2.1.0" and "sarif-2.1.0" in sarif["$schema"]
    (sarif_run,) = sarif["runs"]
    rule_ids = [r["id"] for r in sarif_run["tool"]["driver"]["rules"]]
    assert rule_ids == sorted(rule_ids) and "GM101" in rule_ids
    results = sarif_run["results"]
    assert {r["ruleId"] for r in results} == {"GM101", "GM103", "GM202"}
    for r in results:
        assert rule_ids[r["ruleIndex"]] == r["ruleId"]
        region = r["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "sglang_buggy.py"
    gm202 = [r for r in results if r["ruleId"] == "GM202"][0]
    assert "updated in place:" in gm202["message"]["text"]  # the why-chain travels in the message
    invocation = sarif_run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert invocation["properties"]["servingGradMode"]["mode"] == "no_grad"
    assert "syntax error" in invocation["toolExecutionNotifications"][0]["message"]["text"]


def codes_of(proc) -> list[str]:
    return sorted({line.split()[1] for line in heads(proc.stdout)})


def test_select_ignore_and_opt_in(tmp_path, run):
    copy(tmp_path, BUGGY)
    codes = lambda proc: sorted({line.split()[1] for line in heads(proc.stdout)})  # noqa: E731
    assert codes(run("lints", "--select", "GM1", ".")) == ["GM101", "GM103"]
    assert codes(run("lints", "--ignore", "GM101,GM103", ".")) == ["GM202"]
    assert codes(run("lints", "--select", "GM2", ".")) == ["GM201", "GM202"]
    assert codes(run("lints", "--extend-select", "GM201", ".")) == ["GM101", "GM103", "GM201", "GM202"]
    assert codes(run("lints", "--select", "GM", ".")) == ["GM101", "GM103", "GM202"]  # the whole family: the defaults
    bad = run("lints", "--select", "XX1", ".")
    assert bad.returncode == 2 and "unknown rule code" in bad.stderr


def test_noqa_in_standalone_cli(tmp_path, run):
    (tmp_path / "a.py").write_text(
        "import torch\n"
        "def warmup(m):\n"
        "    with torch.inference_mode():  # noqa: GM101\n"
        "        m()\n"
        "    with torch.inference_mode():  # noqa\n"
        "        m()\n"
        "    with torch.inference_mode():  # noqa: GM202\n"
        "        m()\n"
        "    with torch.inference_mode():  # NOQA:GM1\n"
        "        m()\n"
    )
    proc = run("lints", "a.py")
    assert proc.returncode == 1
    assert [line.split(":")[1] for line in heads(proc.stdout)] == ["7"]


def test_pyproject_config_is_read(tmp_path, run):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.gradmode]\nextend-path-patterns = ['*prime_kernels*']\nignore = ['GM103']\n")
    (tmp_path / "a.py").write_text(
        "import torch\n"
        "def prime_kernels(m, run_ctx=None):\n"
        "    with torch.inference_mode():\n"
        "        m()\n"
        "    ctx = run_ctx or torch.inference_mode()\n"
    )
    proc = run("lints", "a.py")
    assert [line.split()[1] for line in heads(proc.stdout)] == ["GM101"]
    assert "name `prime_kernels` matches `*prime_kernels*`" in proc.stdout
    # command-line options override the file
    assert run("lints", "--path-patterns", "*other*", "a.py").returncode == 0
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\nserving-grad-mode = 'inference_mode'\n")
    proc = run("lints", "a.py")
    assert proc.returncode == 0
    assert "serving grad mode: inference_mode (config: serving-grad-mode in the configuration)" in proc.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\nserving-grad-mode = 'eager'\n")
    bad = run("lints", "a.py")
    assert bad.returncode == 2 and "serving-grad-mode must be one of" in bad.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\npath-paterns = ['x']\n")
    bad = run("lints", "a.py")
    assert bad.returncode == 2 and "unknown [tool.gradmode] setting 'path-paterns'" in bad.stderr


def test_entry_grad_mode_setting_and_option(tmp_path, run):
    """How a host calls what no project code calls: unknown by default (no finding); the setting and the
    option say otherwise; a wrong value is a clear error, in the file and on the command line, and the file
    is left as it was."""
    source = ("import torch\n"
              "class Layer:\n"
              "    def generate(self, x):\n"
              "        if self._cache is None:\n"
              "            self._cache = torch.zeros_like(x)\n"
              "        return self._cache + x\n"
              "    def update(self, x):\n"
              "        with torch.inference_mode(False):\n"
              "            self._cache.copy_(x)\n")
    (tmp_path / "a.py").write_text(source)
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\n")
    assert run("lints", "a.py").returncode == 0
    assert [line.split()[1] for line in heads(run("lints", "--entry-grad-mode", "inference_mode", "a.py").stdout)] \
        == ["GM202"]
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\nentry-grad-mode = 'inference_mode'\n")
    assert [line.split()[1] for line in heads(run("lints", "a.py").stdout)] == ["GM202"]
    assert run("lints", "--entry-grad-mode", "unknown", "a.py").returncode == 0  # the option wins
    for setting in ("'eager'", "3"):
        (tmp_path / "pyproject.toml").write_text(f"[tool.gradmode]\nentry-grad-mode = {setting}\n")
        bad = run("lints", "a.py")
        assert bad.returncode == 2 and "entry-grad-mode must be" in bad.stderr, bad.stderr
    bad = run("lints", "--entry-grad-mode", "eager", "a.py")
    assert bad.returncode == 2 and "--entry-grad-mode" in bad.stderr
    assert (tmp_path / "a.py").read_text() == source


def test_module_globs_and_class_patterns(tmp_path, run):
    (tmp_path / "warmers").mkdir()
    (tmp_path / "warmers" / "jit.py").write_text(
        "import torch\ndef prepare(m):\n    with torch.inference_mode():\n        m()\n")
    # `*capture*` needs confirmation (a CUDA graph, or a class matching class-patterns)
    (tmp_path / "engine.py").write_text(
        "import torch\nclass TileTuner:\n    def capture_tiles(self):\n        with torch.inference_mode():\n"
        "            self.tune()\n")
    assert run("lints", ".").returncode == 0
    proc = run("lints", "--module-globs", "warmers/*.py", "--class-patterns", "*Tuner", ".")
    assert proc.returncode == 1
    assert [line.split(":")[0] for line in heads(proc.stdout)] == ["engine.py", "warmers/jit.py"]
    assert "    module matches `warmers/*.py`" in proc.stdout.splitlines()
    assert "name `capture_tiles` matches `*capture*` and method of `TileTuner` (matches `*Tuner`)" in proc.stdout


def test_explain_and_rules(run):
    proc = run("lints", "explain", "GM101")
    assert proc.returncode == 0
    for part in ("GM101", "Why:", "Fix:", "Reported (INVALID):", "Not reported (VALID):",
                 "with torch.inference_mode():", "nullcontext", "# engine/platform.py"):
        assert part in proc.stdout, part
    assert run("lints", "explain", "GM999").returncode == 2
    assert run("lints", "explain").returncode == 2
    listing = run("lints", "rules").stdout
    assert "GM201" in listing and "(opt-in)" in listing
    assert len(listing.splitlines()) == 8


def test_no_path_is_the_current_folder(tmp_path, run):
    copy(tmp_path, BUGGY)
    assert codes_of(run("lints")) == codes_of(run("lints", ".")) == ["GM101", "GM103", "GM202"]
    sarif = run("lints", "--format", "sarif", "-o", "report.sarif")
    assert sarif.returncode == 1 and json.loads((tmp_path / "report.sarif").read_text())["runs"][0]["results"]
    diff = run("lints.codemod", "--diff")
    assert diff.returncode == 1 and "-        with torch.inference_mode(), autotune(True):" in diff.stdout
    (tmp_path / "empty").mkdir()
    assert run("lints", cwd=tmp_path / "empty").returncode == 0


def test_rule_codes_of_the_command_line_layer_over_the_configuration(tmp_path, run):
    """As ruff: the configuration's extend-select adds to the defaults; on the command line --ignore and
    --extend-select add to the configuration's lists and --select starts over."""
    copy(tmp_path, BUGGY)
    (tmp_path / "pyproject.toml").write_text('[tool.gradmode]\nextend-select = ["GM201"]\n')
    assert codes_of(run("lints")) == ["GM101", "GM103", "GM201", "GM202"]
    (tmp_path / "pyproject.toml").write_text('[tool.gradmode]\nignore = ["GM101"]\n')
    assert codes_of(run("lints", "--ignore", "GM202")) == ["GM103"]
    assert codes_of(run("lints", "--extend-select", "GM201")) == ["GM103", "GM201", "GM202"]
    assert codes_of(run("lints", "--select", "GM101")) == ["GM101"]
    fixed = run("lints.codemod", "--diff", "--ignore", "GM202").stdout
    assert "+        with run_ctx or contextlib.nullcontext():" in fixed  # GM103's fix; GM101's is ignored
    assert "-        with torch.inference_mode(), autotune(True):" not in fixed


def test_missing_path_is_an_error(tmp_path, run):
    copy(tmp_path, BUGGY)
    proc = run("lints", "nope.py", "sglang_buggy.py")
    assert proc.returncode == 2
    assert "nope.py: error: no such file or directory" in proc.stderr
    assert "GM101" in proc.stdout  # the other file is still linted


def test_only_requested_files_are_reported_with_the_project_as_context(tmp_path, run):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "helper.py").write_text(
        "import torch\ndef prepare(m):\n    with torch.inference_mode():\n        m()\n")
    (tmp_path / "pkg" / "warm.py").write_text(
        "import torch\nfrom pkg.helper import prepare\ndef warmup(m):\n    prepare(m)\n"
        "    with torch.inference_mode():\n        m()\n")
    only_helper = run("lints", "pkg/helper.py")
    assert [line.split(":")[0] + ":" + line.split(":")[1] for line in heads(only_helper.stdout)] == ["pkg/helper.py:3"]
    assert "called from `warmup()` at pkg/warm.py:4" in only_helper.stdout
    only_warm = run("lints", "pkg/warm.py")
    assert [line.split(":")[0] for line in heads(only_warm.stdout)] == ["pkg/warm.py"]
    # absolute paths and paths that climb out of the working folder
    absolute = run("lints", str(tmp_path / "pkg" / "helper.py"), cwd=tmp_path / "pkg")
    assert heads(absolute.stdout)[0].startswith(f"{tmp_path / 'pkg' / 'helper.py'}:3:10: GM101 ")
    climbing = run("lints", "../pkg/helper.py", cwd=tmp_path / "pkg")
    assert heads(climbing.stdout)[0].startswith("../pkg/helper.py:3:10: GM101 ")


def test_lint_from_a_sub_folder_of_the_project(tmp_path, run):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "helper.py").write_text(
        "import torch\ndef prepare(m):\n    with torch.inference_mode():\n        m()\n")
    (tmp_path / "pkg" / "warm.py").write_text(
        "from pkg.helper import prepare\ndef warmup(m):\n    prepare(m)\n")
    sub = run("lints", "helper.py", cwd=tmp_path / "pkg")
    assert sub.returncode == 1, sub.stderr
    assert heads(sub.stdout)[0].startswith("helper.py:3:10: GM101 ")


@pytest.mark.slow
def test_jobs_and_cache_give_identical_results(tmp_path, run):
    for i in range(6):
        shutil.copy(BUGGY, tmp_path / f"b{i}.py")
        shutil.copy(FIXED, tmp_path / f"f{i}.py")
    outputs = [
        run("lints", "--format", "json", "--jobs", jobs, *extra, ".").stdout
        for jobs in ("1", "2") for extra in (["--no-cache"], [], [])  # uncached, cold cache, warm cache
    ]
    assert len(set(outputs)) == 1
    assert len(json.loads(outputs[0])["findings"]) == 24
    assert any((tmp_path / ".gradmode_cache_test").iterdir())


def test_cache_dir_option_and_default_location(tmp_path, run):
    copy(tmp_path, BUGGY)
    cache = tmp_path / "my-cache"
    assert run("lints", "--cache-dir", str(cache), ".").returncode == 1
    assert (cache_folder(str(tmp_path), cache) / "cache.sqlite3").is_file()  # a folder per project
    env = {k: v for k, v in os.environ.items() if k != "GRADMODE_CACHE_DIR"}
    proc = subprocess.run([sys.executable, "-m", "lints", "."], cwd=tmp_path, capture_output=True, text=True,
                          env=dict(env, PYTHONPATH=str(ROOT)), timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert (tmp_path / ".gradmode_cache" / "cache.sqlite3").is_file()  # in the project root
    assert (tmp_path / ".gradmode_cache" / ".gitignore").is_file()


def test_cache_follows_content_and_config(tmp_path, run):
    path = tmp_path / "a.py"
    path.write_text("import torch\ndef warmup(m):\n    with torch.inference_mode():\n        m()\n")
    assert run("lints", "a.py").returncode == 1
    path.write_text("import torch\ndef warmup(m):\n    with torch.no_grad():\n        m()\n")
    assert run("lints", "a.py").returncode == 0
    path.write_text("import torch\ndef warmup(m):\n    with torch.no_grad():\n        m()\n")
    proc = run("lints", "--serving-grad-mode", "inference_mode", "a.py")
    assert proc.returncode == 1 and "GM105" in proc.stdout


@pytest.mark.slow
def test_corrupt_cache_is_ignored(tmp_path, run):
    copy(tmp_path, BUGGY)
    cache = cache_folder(str(tmp_path), tmp_path / "cache")
    cache.mkdir(parents=True)
    (cache / "cache.sqlite3").write_text("{not json")
    first = run("lints", "--cache-dir", str(cache.parent), "--format", "json", ".")
    assert first.returncode == 1 and "Traceback" not in first.stderr
    write_cache_fact(cache, "format", "other")
    assert run("lints", "--cache-dir", str(cache.parent), "--format", "json", ".").stdout == first.stdout


SEVERAL_FIXES = ("import torch\n"
                 "def warmup_a(model):\n    with torch.inference_mode():\n        return model()\n"
                 "def warmup_b(model):\n    ctx = torch.inference_mode()\n    with ctx:\n        return model()\n"
                 "@torch.inference_mode()\ndef warmup_c(model):\n    return model()\n")


def _apply_edits(text: str, edits: list) -> str:
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(at: dict) -> int:
        return starts[at["row"] - 1] + at["column"] - 1

    for edit in sorted(edits, key=lambda e: offset(e["location"]), reverse=True):
        text = text[:offset(edit["location"])] + edit["content"] + text[offset(edit["end_location"]):]
    return text


def test_json_edits_of_several_findings_in_one_file_each_fix_their_own_function(tmp_path, run):
    """One parse serves every finding's edits: each set, applied alone, fixes its function and no other."""
    import torch

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "w.py").write_text(SEVERAL_FIXES)
    data = json.loads(run("lints", "--format", "json", "w.py", cwd=tmp_path).stdout)
    assert sorted(f["code"] for f in data["findings"]) == ["GM101", "GM102", "GM103"]
    for finding in data["findings"]:
        fixed = _apply_edits(SEVERAL_FIXES, finding["fix"]["edits"])
        namespace: dict = {}
        exec(compile(fixed, "w.py", "exec"), namespace)
        under = {name: namespace[name](torch.is_inference_mode_enabled) for name in ("warmup_a", "warmup_b",
                                                                                     "warmup_c")}
        fixed_one = {"GM101": "warmup_a", "GM103": "warmup_b", "GM102": "warmup_c"}[finding["code"]]
        assert under == {name: name != fixed_one for name in under}, (finding["code"], fixed)


def test_fix_takes_the_cache_options(tmp_path, run):
    """`--fix` hands --no-cache and --cache-dir to the codemod (it dropped them: the project's own
    cache was written either way)."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.gradmode]\n")
    warm = "import torch\ndef warmup(m):\n    with torch.inference_mode():\n        m()\n"
    (project / "warm.py").write_text(warm)
    env = {k: v for k, v in os.environ.items() if k != "GRADMODE_CACHE_DIR"}
    fixed = subprocess.run([sys.executable, "-m", "lints", "--fix", "--no-cache", "."], cwd=project, env=dict(
        env, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=300)
    assert fixed.returncode == 0 and (project / "warm.py").read_text() != warm, fixed
    assert not (project / ".gradmode_cache").exists()
    (project / "warm.py").write_text(warm)
    elsewhere = tmp_path / "elsewhere"
    fixed = subprocess.run([sys.executable, "-m", "lints", "--fix", "--cache-dir", str(elsewhere), "."], cwd=project,
                           env=dict(env, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=300)
    assert fixed.returncode == 0 and (project / "warm.py").read_text() != warm, fixed
    assert not (project / ".gradmode_cache").exists() and list(elsewhere.glob("*/cache.sqlite3"))


MANY_SHAPES = ("import contextlib\n"
               "import torch\n"
               "from torch import inference_mode as im\n"
               "\n"
               "def warmup_a(model):\n    with torch.inference_mode():\n        return model()\n"
               "\n"
               "class Runner:\n"
               "    def capture(self):\n"
               "        with torch.inference_mode(), contextlib.suppress(ValueError):  # why\n"
               "            self.run_once()\n"
               "    @torch.inference_mode()\n"
               "    def warmup(self):\n        self.model()\n"
               "\n"
               "def warmup_b(model):\n    with torch.inference_mode() as guard:\n        return model(guard)\n"
               "def warmup_c(model):\n    with im():\n        model()\n"
               "def warmup_d(model):\n    ctx = torch.inference_mode()\n    with ctx:\n        return model()\n"
               "def warmup_e(model):\n    with im():\n        model()\n"
               "def warmup_last(model):\n    with torch.inference_mode():\n        model()")


def test_json_edits_fixing_one_statement_match_fixing_the_whole_file(tmp_path, monkeypatch):
    """``fix_edits`` rewrites, prints and checks only the statements a fix changes (per finding, the whole
    file made --format json quadratic); its edits are those of fixing the whole file, and it falls back
    to that where it must (an import to add, the file's last statement)."""
    from lints import editor_fixes
    from lints.file_fixes import FixOptions, ParsedSource
    from lints.engine import lint_project
    from lints.sources import read_source

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "w.py").write_text(MANY_SHAPES)
    with chdir(tmp_path):
        run = lint_project(["w.py"], Config(), use_cache=False)
        assert len(run.findings) >= 7, run.findings
        source = read_source("w.py")
        options = FixOptions(Config(), findings={})
        whole_file_fixes = []
        real_fix_text = editor_fixes.fix_text
        monkeypatch.setattr(editor_fixes, "fix_text",
                            lambda *a, **k: whole_file_fixes.append(1) or real_fix_text(*a, **k))
        parsed = ParsedSource()
        by_statement = [editor_fixes.fix_edits(source, f, options, parsed) for f in run.findings]
        assert 0 < len(whole_file_fixes) < len(run.findings) - 3, (len(whole_file_fixes), len(run.findings))
        monkeypatch.setattr(editor_fixes, "_statement_edits", lambda *a: None)
        parsed = ParsedSource()
        whole = [editor_fixes.fix_edits(source, f, options, parsed) for f in run.findings]
    assert by_statement == whole
    assert all(edits for edits in whole), whole
    for finding, edits in zip(run.findings, by_statement):
        fixed = _apply_edits(MANY_SHAPES, edits)
        compile(fixed, "w.py", "exec")
        assert fixed != MANY_SHAPES and fixed.count("inference_mode") + fixed.count("im()") < \
            MANY_SHAPES.count("inference_mode") + MANY_SHAPES.count("im()"), finding


@pytest.mark.parametrize("uses", ["    o.inference_mode\n    o(inference_mode=1)\n",
                                  "    with inference_mode():\n        o()\n"])
def test_json_edits_remove_an_import_the_fix_leaves_unused_as_the_whole_file_fix_does(tmp_path, monkeypatch, uses):
    """An attribute or keyword named like the import is no use of it: the fix of the only `with` removes
    the import, as fixing the whole file does; with a second use, it stays."""
    from lints import editor_fixes
    from lints.file_fixes import FixOptions, ParsedSource
    from lints.fix_inputs import file_identity
    from lints.engine import lint_project
    from lints.sources import read_source

    text = ("import torch\nfrom torch import inference_mode\n\ndef warmup(model):\n    with inference_mode():\n"
            "        model()\n\ndef tail(o):\n" + uses)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "w.py").write_text(text)
    with chdir(tmp_path):
        run = lint_project(["w.py"], Config(), use_cache=False)
        finding = next(f for f in run.findings if f.line == 5)
        source = read_source("w.py")
        options = FixOptions(Config(), findings={}, imported={file_identity("w.py"): set()})
        by_statement = editor_fixes.fix_edits(source, finding, options, ParsedSource())
        monkeypatch.setattr(editor_fixes, "_statement_edits", lambda *a: None)
        whole = editor_fixes.fix_edits(source, finding, options, ParsedSource())
    assert by_statement == whole
    assert ("from torch import inference_mode" in _apply_edits(text, whole)) == ("with" in uses)


def test_ctrl_c_ends_with_a_word_and_status_130(tmp_path):
    """Interrupted mid-run (here: the analysis raises KeyboardInterrupt, as Ctrl-C does), the CLI says so in one
    line, prints no traceback and exits 130, as a shell reports a command stopped by SIGINT."""
    (tmp_path / "a.py").write_text("import torch\n")
    script = ("import sys, lints.engine as engine\n"
              "def interrupted(*args, **kwargs):\n"
              "    raise KeyboardInterrupt\n"
              "engine.lint_project = interrupted\n"
              "sys.argv = ['gradmode-lint', 'a.py', '--no-cache']\n"
              "from lints.cli import entry\n"
              "entry()\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 130
    assert done.stderr.strip() == "gradmode-lint: interrupted"
    assert done.stdout == ""
