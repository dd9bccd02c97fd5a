"""`python -m lints`: formats, exit codes, selection, noqa, explain, config, cache, jobs."""
from __future__ import annotations

import json
import shutil

from .helpers import FIXTURES

BUGGY = FIXTURES / "lint" / "sglang_buggy.py"
FIXED = FIXTURES / "lint" / "sglang_fixed.py"


def copy(tmp_path, *sources):
    for src in sources:
        shutil.copy(src, tmp_path / src.name)
    return tmp_path


def test_exit_codes_and_text_format(tmp_path, run):
    copy(tmp_path, BUGGY, FIXED)
    proc = run("lints", "sglang_buggy.py")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert [line.split(": ", 1)[1].split()[0] for line in lines] == ["GM202", "GM202", "GM101", "GM103"]
    assert lines[2].startswith("sglang_buggy.py:41:14: GM101 ")
    assert "4 finding(s) in 1 file(s)" in proc.stderr
    clean = run("lints", "sglang_fixed.py")
    assert clean.returncode == 0 and clean.stdout == ""


def test_json_format(tmp_path, run):
    copy(tmp_path, BUGGY)
    data = json.loads(run("lints", "--format", "json", ".").stdout)
    assert data["errors"] == []
    assert {(f["code"], f["line"], f["col"]) for f in data["findings"]} == {
        ("GM202", 16, 13), ("GM202", 21, 13), ("GM101", 41, 14), ("GM103", 50, 25)}
    assert {f["severity"] for f in data["findings"] if f["code"] == "GM202"} == {"error"}


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
    invocation = sarif_run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert "syntax error" in invocation["toolExecutionNotifications"][0]["message"]["text"]


def test_select_ignore_and_opt_in(tmp_path, run):
    copy(tmp_path, BUGGY)
    codes = lambda proc: sorted({line.split()[1] for line in proc.stdout.splitlines()})  # noqa: E731
    assert codes(run("lints", "--select", "GM1", ".")) == ["GM101", "GM103"]
    assert codes(run("lints", "--ignore", "GM101,GM103", ".")) == ["GM202"]
    assert codes(run("lints", "--select", "GM2", ".")) == ["GM201", "GM202"]
    assert codes(run("lints", "--extend-select", "GM201", ".")) == ["GM101", "GM103", "GM201", "GM202"]
    assert codes(run("lints", "--select", "GM", ".")) == ["GM101", "GM103", "GM201", "GM202"]  # as flake8 does
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
    assert [line.split(":")[1] for line in proc.stdout.splitlines()] == ["7"]


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
    assert [line.split()[1] for line in proc.stdout.splitlines()] == ["GM101"]
    assert "`prime_kernels` matches `*prime_kernels*`" in proc.stdout
    # command-line options override the file
    assert run("lints", "--path-patterns", "*other*", "a.py").returncode == 0
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\nserving-grad-mode = 'eager'\n")
    bad = run("lints", "a.py")
    assert bad.returncode == 2 and "serving-grad-mode must be one of" in bad.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\npath-paterns = ['x']\n")
    bad = run("lints", "a.py")
    assert bad.returncode == 2 and "unknown [tool.gradmode] setting 'path-paterns'" in bad.stderr


def test_module_globs_and_class_patterns(tmp_path, run):
    (tmp_path / "warmers").mkdir()
    (tmp_path / "warmers" / "jit.py").write_text(
        "import torch\ndef prepare(m):\n    with torch.inference_mode():\n        m()\n")
    (tmp_path / "engine.py").write_text(
        "import torch\nclass TileTuner:\n    def step(self):\n        with torch.inference_mode():\n            pass\n")
    assert run("lints", ".").returncode == 0
    proc = run("lints", "--module-globs", "warmers/*.py", "--class-patterns", "*Tuner", ".")
    assert proc.returncode == 1
    assert "module matches `warmers/*.py`" in proc.stdout and "method of `TileTuner`" in proc.stdout


def test_explain_and_rules(run):
    proc = run("lints", "explain", "GM101")
    assert proc.returncode == 0
    for part in ("GM101", "Why:", "Bad:", "Good:", "Fix:", "with torch.inference_mode():", "nullcontext"):
        assert part in proc.stdout
    assert run("lints", "explain", "GM999").returncode == 2
    listing = run("lints", "rules").stdout
    assert "GM201" in listing and "(opt-in)" in listing


def test_no_paths_is_clean_not_a_crash(run):
    proc = run("lints")
    assert proc.returncode == 0 and "no files to lint" in proc.stderr


def test_missing_path_is_an_error(tmp_path, run):
    copy(tmp_path, BUGGY)
    proc = run("lints", "nope.py", "sglang_buggy.py")
    assert proc.returncode == 2
    assert "nope.py: error: no such file or directory" in proc.stderr
    assert "GM101" in proc.stdout  # the other file is still linted


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


def test_cache_follows_content_and_config(tmp_path, run):
    path = tmp_path / "a.py"
    path.write_text("import torch\ndef warmup(m):\n    with torch.inference_mode():\n        m()\n")
    assert run("lints", "a.py").returncode == 1
    path.write_text("import torch\ndef warmup(m):\n    with torch.no_grad():\n        m()\n")
    assert run("lints", "a.py").returncode == 0
    path.write_text("import torch\ndef warmup(m):\n    with torch.no_grad():\n        m()\n")
    assert run("lints", "--serving-grad-mode", "inference_mode", "a.py").returncode == 1
