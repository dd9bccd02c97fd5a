"""What users bring from ruff, flake8 and pre-commit, through the installed console scripts
(`gradmode-lint`, `gradmode-fix`) in temp projects: diffs that apply, --add-noqa, baselines, the
progress bar, the editor JSON, short finding lines and a clean-venv install (the README's pinned
revision: test_conventions_output.py)."""
from __future__ import annotations

import ast
import json
import os
import pty
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from lints import __version__
from lints.options import Config
from lints.output import render_text
from lints.rule import MAX_MESSAGE
from lints.rules import ALL_RULES

from .helpers import BIN, ROOT, as_files, lint_run, write_package
from .helpers import run_script as script

WARM = ("import torch\n"
        "def warmup(model):\n"
        "    with torch.inference_mode():\n"
        "        model()\n")
SERVE = ("import torch\n"
         "from eng.warm import warmup\n"
         "def serve(model):\n"
         "    with torch.no_grad():\n"
         "        return model()\n")


def project(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    return write_package(tmp_path / "repo", files or {"eng/warm.py": WARM, "eng/serve.py": SERVE})


def test_both_console_scripts_tell_their_version(tmp_path):
    for name in ("gradmode-lint", "gradmode-fix"):
        proc = script(name, "--version", cwd=tmp_path)
        assert proc.returncode == 0 and proc.stdout.strip() == f"{name} {__version__}", proc


@pytest.mark.parametrize("spelling", [".", "./eng", pytest.param("eng//warm.py", marks=pytest.mark.slow),
                                      pytest.param("eng/../eng/warm.py", marks=pytest.mark.slow)])
def test_diff_applies_with_git_apply_and_patch_whatever_the_path_spelling(tmp_path, spelling):
    root = project(tmp_path)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    diff = script("gradmode-fix", "--diff", spelling, cwd=root)
    assert diff.returncode == 1 and diff.stdout.startswith("--- a/eng/warm.py\n+++ b/eng/warm.py\n"), diff
    (tmp_path / "fix.patch").write_text(diff.stdout)
    check = subprocess.run(["git", "apply", "--check", str(tmp_path / "fix.patch")], cwd=root,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    patched = subprocess.run(["patch", "-p1", "-i", str(tmp_path / "fix.patch")], cwd=root, capture_output=True,
                             text=True)
    assert patched.returncode == 0, patched.stdout + patched.stderr
    assert script("gradmode-lint", ".", cwd=root).returncode == 0  # the patched tree is clean
    other = project(tmp_path / "other")
    outside = script("gradmode-fix", "--diff", "../other/repo/eng/warm.py", cwd=root)
    assert outside.stdout.startswith(f"--- {other / 'eng' / 'warm.py'}\n"), outside.stdout  # for `patch -p0`


def test_add_noqa_marks_every_finding_and_changes_nothing_else(tmp_path):
    files = {"eng/warm.py": WARM.replace("model()\n", "model()  # noqa: E501\n")
             .replace("with torch.inference_mode():", "with torch.inference_mode():  # noqa: E501"),
             "eng/other.py": "import torch\ndef warmup_too(model):\n    with torch.inference_mode(): model()\n",
             "eng/serve.py": SERVE}
    root = project(tmp_path, files)
    before = {p: ast.dump(ast.parse((root / p).read_text())) for p in files}
    proc = script("gradmode-lint", "--add-noqa", ".", cwd=root)
    assert proc.returncode == 0 and "added `# noqa` to 2 line(s)" in proc.stderr, proc
    assert (root / "eng/warm.py").read_text().splitlines()[2] == \
        "    with torch.inference_mode():  # noqa: E501, GM101"
    assert (root / "eng/other.py").read_text().splitlines()[2].endswith("model()  # noqa: GM101")
    assert {p: ast.dump(ast.parse((root / p).read_text())) for p in files} == before  # only comments changed
    again = script("gradmode-lint", ".", cwd=root)
    assert again.returncode == 0 and again.stdout == "", again
    marked = {p: (root / p).read_bytes() for p in files}
    assert script("gradmode-lint", "--add-noqa", ".", cwd=root).returncode == 0
    assert {p: (root / p).read_bytes() for p in files} == marked  # a second run adds nothing


def test_add_noqa_marks_a_statement_that_goes_on_inside_a_string_at_its_last_line(tmp_path):
    source = ("import contextlib, torch\n"
              "def warmup(model):\n"
              "    with torch.inference_mode(), contextlib.suppress(print('''a\n"
              "b''')):\n"
              "        model()\n")
    root = project(tmp_path, {"eng/warm.py": source})
    proc = script("gradmode-lint", "--add-noqa", ".", cwd=root)
    assert proc.returncode == 0 and "added `# noqa` to 1 line(s)" in proc.stderr, proc
    assert (root / "eng/warm.py").read_text() == source.replace("b''')):", "b''')):  # noqa: GM101")
    assert script("gradmode-lint", "--no-cache", ".", cwd=root).returncode == 0
    flake8 = subprocess.run([str(BIN / "flake8"), "--select", "GM", "eng/warm.py"], cwd=root, capture_output=True,
                            text=True)
    assert flake8.returncode == 0 and flake8.stdout == "", flake8


def test_baseline_hides_recorded_findings_and_reports_new_ones(tmp_path):
    root = project(tmp_path)
    written = script("gradmode-lint", "--write-baseline", "gradmode-baseline.json", ".", cwd=root)
    assert written.returncode == 0 and "recorded 1 finding(s)" in written.stderr, written
    # Lines added above the old finding do not bring it back; a new finding in another file is reported.
    warm = root / "eng" / "warm.py"
    warm.write_text("# a new header\n\n" + warm.read_text())
    (root / "eng" / "new.py").write_text(WARM.replace("warmup", "autotune_kernels"))
    proc = script("gradmode-lint", "--baseline", "gradmode-baseline.json", "--format", "concise", ".", cwd=root)
    assert proc.returncode == 1, proc
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == ["eng/new.py"]
    assert "1 in the baseline not shown" in proc.stderr
    elsewhere = script("gradmode-lint", "--baseline", str(root / "gradmode-baseline.json"), "--format", "concise",
                       str(root), cwd=tmp_path)
    assert [line.split(":")[0] for line in elsewhere.stdout.splitlines()] == [str(root / "eng" / "new.py")]
    (root / "broken.json").write_text("{")
    broken = script("gradmode-lint", "--baseline", "broken.json", ".", cwd=root)
    assert broken.returncode == 2 and "broken.json is not a gradmode-lint baseline" in broken.stderr


def test_baseline_matches_findings_whose_message_names_a_line_after_the_lines_move(tmp_path):
    """GM104's message names the line of the inference-mode block (`(line 6)`): lines added above it
    change that number, and the recorded finding must still be hidden."""
    root = project(tmp_path, {"eng/warm.py": "import torch\n\ndef warmup(m):\n    m()\n\ndef run(m):\n"
                                             "    with torch.inference_mode():\n        warmup(m)\n"})
    first = script("gradmode-lint", "--no-cache", "--format", "concise", ".", cwd=root)
    assert "GM104" in first.stdout and "(line 7)" in first.stdout, first.stdout
    assert script("gradmode-lint", "--write-baseline", "b.json", ".", cwd=root).returncode == 0
    warm = root / "eng" / "warm.py"
    warm.write_text("# one\n# two\n" + warm.read_text())
    moved = script("gradmode-lint", "--no-cache", "--format", "concise", ".", cwd=root)
    assert "(line 9)" in moved.stdout, moved.stdout
    proc = script("gradmode-lint", "--no-cache", "--baseline", "b.json", ".", cwd=root)
    assert proc.returncode == 0 and proc.stdout == "", proc
    # a number that is not a line number still tells findings apart
    data = json.loads((root / "b.json").read_text())
    data["findings"][0]["message"] = data["findings"][0]["message"].replace("warmup", "warmup2")
    (root / "b.json").write_text(json.dumps(data))
    assert script("gradmode-lint", "--no-cache", "--baseline", "b.json", ".", cwd=root).returncode == 1
    data["format"] = True  # True == 1 in Python, but it is no format number
    (root / "b.json").write_text(json.dumps(data))
    refused = script("gradmode-lint", "--no-cache", "--baseline", "b.json", ".", cwd=root)
    assert refused.returncode == 2 and "b.json is not a gradmode-lint baseline" in refused.stderr


def _stderr_on_a_terminal(args: list[str], cwd: Path) -> str:
    main, secondary = pty.openpty()
    try:
        proc = subprocess.Popen([str(BIN / "gradmode-lint"), *args], cwd=cwd, stdout=subprocess.PIPE,
                                stderr=secondary, env=dict(os.environ, GRADMODE_CACHE_DIR=str(cwd / ".c")))
        os.close(secondary)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=120)
    finally:
        os.close(main)
    return b"".join(chunks).decode()


def test_progress_bar_on_a_terminal_only(tmp_path):
    root = project(tmp_path, {f"eng/m{i}.py": SERVE for i in range(30)})
    on_terminal = _stderr_on_a_terminal(["--no-cache", "."], root)
    assert "gradmode-lint: reading [" in on_terminal and "/31 files" in on_terminal, on_terminal
    assert "\r\x1b[K" in on_terminal  # the bar clears its line before the summary
    piped = script("gradmode-lint", "--no-cache", ".", cwd=root)
    assert "reading [" not in piped.stderr and "\r" not in piped.stderr


def _apply(text: str, edits: list[dict]) -> str:
    """Apply ruff-style edits (1-based rows and columns, end exclusive), last first."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(pos: dict) -> int:
        return offsets[pos["row"] - 1] + pos["column"] - 1 if pos["row"] <= len(lines) else len(text)

    for edit in sorted(edits, key=lambda e: (e["location"]["row"], e["location"]["column"]), reverse=True):
        text = text[:offset(edit["location"])] + edit["content"] + text[offset(edit["end_location"]):]
    return text


def test_json_has_end_positions_and_each_fix_as_edits(tmp_path):
    import torch

    source = WARM.replace("model()", "return model()").replace("import torch\n", "import torch\nfrom torch import inference_mode\n") \
        + "def autotune(model):\n    with inference_mode():\n        return torch.is_inference_mode_enabled()\n"
    root = project(tmp_path, {"eng/warm.py": source})
    data = json.loads(script("gradmode-lint", "--format", "json", "eng/warm.py", cwd=root).stdout)
    first, second = data["findings"]
    assert (first["line"], first["col"], first["end_line"], first["end_col"]) == (4, 10, 4, 32)
    assert (second["line"], second["col"], second["end_line"], second["end_col"]) == (7, 10, 7, 26)
    assert first["fix"]["applicability"] == "safe" and first["fix"]["edits"]
    for finding, name in ((first, "warmup"), (second, "autotune")):
        fixed = _apply(source, finding["fix"]["edits"])
        namespace: dict = {}
        exec(compile(fixed, "fixed.py", "exec"), namespace)
        with torch.no_grad():  # the fixed function runs under its caller's grad mode
            assert namespace[name](torch.is_inference_mode_enabled) is False
        (root / "eng" / "warm.py").write_text(fixed)
        left = json.loads(script("gradmode-lint", "--format", "json", "eng/warm.py", cwd=root).stdout)["findings"]
        assert [f["message"] for f in left] == [f["message"] for f in (first, second) if f is not finding]
    assert "from torch import inference_mode" not in _apply(source, second["fix"]["edits"])  # then unused


def test_finding_lines_stay_short_and_keep_long_names_in_the_notes(tmp_path):
    for code, rule in ALL_RULES.items():
        for index, example in enumerate(rule.INVALID):
            config = Config(extend_select=("GM2",), **rule.EXAMPLE_OPTIONS)
            run = lint_run(tmp_path / f"{code}-{index}", as_files(example), config)
            for finding in run.findings:
                assert len(finding.message) <= MAX_MESSAGE, finding.message
    name = "VeryLongNameOfACudaGraphRunnerForTheMixtureOfExpertsKernelsWithPiecewiseCapture"
    source = f"import torch\nclass {name}:\n    def warmup_all_the_kernels_for_every_batch_size(self):\n" \
             "        with torch.inference_mode():\n            self.model()\n"
    (finding,) = lint_run(tmp_path / "long", {"eng/module.py": source}, Config()).findings
    line = render_text([finding], notes=False).rstrip("\n")
    assert len(line) <= 160 and "…" in finding.message, line
    assert name in finding.notes[0]  # the full message is the first note


@pytest.mark.slow
def test_a_built_wheel_installs_and_runs_in_a_clean_venv(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
                    str(ROOT)], check=True, timeout=300)
    (wheel,) = dist.glob("gradmode_lint-*.whl")
    import zipfile

    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"lints", "codemods", f"gradmode_lint-{__version__}.dist-info"}, tops
    env_dir = tmp_path / "clean"
    venv.create(env_dir, with_pip=True)
    bindir = env_dir / "bin"
    subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=600)
    root = project(tmp_path)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp_path)}
    lint = subprocess.run([str(bindir / "gradmode-lint"), "--format", "concise", "."], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert lint.returncode == 1 and lint.stdout.startswith("eng/warm.py:3:10: GM101 "), lint
    fix = subprocess.run([str(bindir / "gradmode-fix"), "."], cwd=root, env=env, capture_output=True, text=True,
                         timeout=300)
    assert fix.returncode == 0, fix
    assert "inference_mode" not in (root / "eng" / "warm.py").read_text()


def _two_projects(tmp_path: Path) -> Path:
    """Two sibling projects; `quiet` ignores GM101 in its own pyproject.toml."""
    write_package(tmp_path / "loud", {"eng/warm.py": WARM})
    write_package(tmp_path / "quiet", {"eng/warm.py": WARM, "gen/warm.py": WARM})
    (tmp_path / "quiet" / "pyproject.toml").write_text('[tool.gradmode]\nignore = ["GM101"]\nexclude = ["gen"]\n')
    return tmp_path


def test_each_file_gets_its_own_projects_config_whatever_the_cwd(tmp_path):
    parent = _two_projects(tmp_path)
    both = script("gradmode-lint", "--format", "concise", "loud", "quiet", cwd=parent)
    assert [line.split(" `")[0] for line in both.stdout.splitlines()] == ["loud/eng/warm.py:3:10: GM101"], both
    inside = script("gradmode-lint", "--format", "concise", "../loud", ".", cwd=parent / "quiet")
    assert [line.split(": GM")[0] for line in inside.stdout.splitlines()] == ["../loud/eng/warm.py:3:10"], inside
    fixed = script("gradmode-fix", "quiet", "loud", cwd=parent)
    assert fixed.returncode == 0, fixed
    assert "inference_mode" not in (parent / "loud/eng/warm.py").read_text()
    assert "inference_mode" in (parent / "quiet/eng/warm.py").read_text()


def test_flake8_reads_each_projects_config_and_its_exclude(tmp_path):
    parent = _two_projects(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "GM", "loud", "quiet"], cwd=parent,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, GRADMODE_CACHE_DIR=str(parent / ".c")))
    assert [line.split(" ")[0] for line in proc.stdout.splitlines()] == ["loud/eng/warm.py:3:10:"], proc


def test_named_paths_under_an_excluded_folder_are_linted_and_a_walk_skips_them(tmp_path):
    """``exclude`` applies to what a walk finds, as in ruff: a file or folder named on the command line
    is linted, with the rest of the project as context (it used to be counted and silently left out)."""
    root = write_package(tmp_path / "repo", {"eng/warm.py": WARM, "eng/serve.py": SERVE, "gen/warm.py": WARM})
    (root / "pyproject.toml").write_text('[tool.gradmode]\nexclude = ["gen"]\n')
    walked = script("gradmode-lint", "--no-cache", "--format", "concise", ".", cwd=root)
    assert [line.split(": GM")[0] for line in walked.stdout.splitlines()] == ["eng/warm.py:3:10"], walked
    for named in ("gen/warm.py", "gen", "./gen/"):
        run = script("gradmode-lint", "--no-cache", "--format", "concise", named, cwd=root)
        assert run.returncode == 1, run
        assert [line.split(": GM")[0] for line in run.stdout.splitlines()] == ["gen/warm.py:3:10"], run
    fixed = script("gradmode-fix", "gen", cwd=root)
    assert fixed.returncode == 0, fixed
    assert "inference_mode" not in (root / "gen/warm.py").read_text()
    assert "inference_mode" in (root / "eng/warm.py").read_text()


def test_an_unknown_code_in_the_config_is_an_error_in_every_front_end(tmp_path):
    root = project(tmp_path)
    (root / "pyproject.toml").write_text('[tool.gradmode]\nignore = ["GM1O1"]\n')  # a letter O
    lint = script("gradmode-lint", ".", cwd=root)
    assert lint.returncode == 2 and "[tool.gradmode]: unknown rule code(s): GM1O1" in lint.stderr, lint
    fix = script("gradmode-fix", ".", cwd=root)
    assert fix.returncode == 2 and "unknown rule code(s): GM1O1" in fix.stderr, fix
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "GM", "eng"], cwd=root,
                            capture_output=True, text=True, timeout=300)
    assert flake8.returncode == 1 and "GM001" in flake8.stdout and "GM1O1" in flake8.stdout, flake8


@pytest.mark.parametrize("toml, why", [
    ("tool.gradmode = 5\n", "[tool.gradmode] must be a table"),
    ("[tool]\ngradmode = [1]\n", "[tool.gradmode] must be a table"),
    ("x = " + "[" * 5000 + "]" * 5000 + "\n", "cannot read config: nested too deeply"),
])
def test_a_config_of_the_wrong_shape_is_one_error_line_in_every_front_end(tmp_path, toml, why):
    root = project(tmp_path)
    (root / "pyproject.toml").write_text(toml)
    lint = script("gradmode-lint", ".", cwd=root)
    assert lint.returncode == 2 and "Traceback" not in lint.stderr, lint
    assert lint.stderr.strip() == f"gradmode-lint: error: {root / 'pyproject.toml'}: {why}", lint
    fix = script("gradmode-fix", ".", cwd=root)
    assert fix.returncode == 2 and why in fix.stderr and "Traceback" not in fix.stderr, fix
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "GM", "eng"], cwd=root,
                            capture_output=True, text=True, timeout=300)
    assert flake8.returncode == 1 and "GM001" in flake8.stdout and why in flake8.stdout, flake8


def test_a_tool_key_that_is_no_table_is_someone_elses_business(tmp_path):
    root = project(tmp_path)
    (root / "pyproject.toml").write_text('tool = "gradmode"\n')
    lint = script("gradmode-lint", "--format", "concise", ".", cwd=root)
    assert lint.returncode == 1 and lint.stdout.startswith("eng/warm.py:3:10: GM101"), lint


def test_new_options_on_bad_input_fail_clearly_and_change_nothing(tmp_path):
    root = project(tmp_path)
    before = {p: p.read_bytes() for p in root.rglob("*.py")}
    missing = script("gradmode-lint", "--baseline", "nowhere.json", ".", cwd=root)
    assert missing.returncode == 2 and "cannot read baseline nowhere.json" in missing.stderr, missing
    other = root / "other.json"
    other.write_text('{"tool": "ruff", "format": 1, "findings": []}')
    foreign = script("gradmode-lint", "--baseline", "other.json", ".", cwd=root)
    assert foreign.returncode == 2 and "not a gradmode-lint baseline" in foreign.stderr, foreign
    stdin = script("gradmode-lint", "-", "--stdin-filename", "eng/warm.py", "--add-noqa", cwd=root, input=WARM)
    assert stdin.returncode == 2 and "need files, not stdin" in stdin.stderr, stdin
    assert "Traceback" not in missing.stderr + foreign.stderr + stdin.stderr
    assert {p: p.read_bytes() for p in root.rglob("*.py")} == before


def test_json_and_sarif_give_each_projects_serving_mode(tmp_path):
    write_package(tmp_path / "a", {"eng/warm.py": WARM, "eng/serve.py": SERVE})
    write_package(tmp_path / "b", {"eng/warm.py": WARM, "eng/serve.py": SERVE})
    (tmp_path / "b" / "pyproject.toml").write_text('[tool.gradmode]\nserving-grad-mode = "inference_mode"\n')
    modes = {"a": ("no_grad", "inferred"), "b": ("inference_mode", "config")}
    data = json.loads(script("gradmode-lint", "--format", "json", "--no-cache", "a", "b", cwd=tmp_path).stdout)
    assert data["serving_grad_mode"] == {}  # one per project, below
    assert {p["root"]: (p["serving_grad_mode"]["mode"], p["serving_grad_mode"]["source"])
            for p in data["projects"]} == modes
    sarif = json.loads(script("gradmode-lint", "--format", "sarif", "--no-cache", "a", "b", cwd=tmp_path).stdout)
    properties = sarif["runs"][0]["invocations"][0]["properties"]
    assert {p["root"]: (p["servingGradMode"]["mode"], p["servingGradMode"]["source"])
            for p in properties["projects"]} == modes
    one = json.loads(script("gradmode-lint", "--format", "json", "--no-cache", "b", cwd=tmp_path).stdout)
    assert one["serving_grad_mode"]["mode"] == "inference_mode"
    assert [p["root"] for p in one["projects"]] == ["b"]


def test_a_project_without_files_of_its_own_has_no_say_in_the_serving_mode(tmp_path):
    """A repository whose code is all in a project with settings of its own: its root project gave a
    default mode beside the real one, and made the top-level mode {}."""
    (tmp_path / ".git").mkdir()
    write_package(tmp_path / "svc", {"eng/warm.py": WARM, "eng/serve.py": SERVE})
    (tmp_path / "svc" / "pyproject.toml").write_text('[tool.gradmode]\nserving-grad-mode = "inference_mode"\n')
    proc = script("gradmode-lint", "--format", "json", "--no-cache", ".", cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert [p["root"] for p in data["projects"]] == ["svc"], data["projects"]
    assert data["serving_grad_mode"]["mode"] == "inference_mode"
    assert [line for line in proc.stderr.splitlines() if "serving grad mode" in line] == [
        "gradmode-lint: serving grad mode: inference_mode (config: serving-grad-mode in the configuration)"], proc
