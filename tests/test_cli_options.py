"""The ruff/flake8 conventions of the CLI, through the installed console script in temp projects."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .helpers import ROOT, run_script, write_package

WARM = ("import torch\n"
        "def warmup(model):\n"
        "    with torch.inference_mode():\n"
        "        model()\n")
PROJECT = {"eng/warm.py": WARM, "eng/other.py": WARM}


def _project(tmp_path, pyproject: str = ""):
    root = write_package(tmp_path / "repo", PROJECT)
    (root / "pyproject.toml").write_text(pyproject)
    return root


def test_statistics_counts_per_code(tmp_path):
    root = _project(tmp_path)
    proc = run_script("gradmode-lint", ".", "--statistics", "--format", "concise", cwd=root)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == "    2  GM101 [*]\n"  # as ruff's: the counts in place of the findings


def test_concise_has_no_notes_and_text_has_them(tmp_path):
    root = _project(tmp_path)
    concise = run_script("gradmode-lint", "eng/warm.py", "--format", "concise", cwd=root).stdout.splitlines()
    text = run_script("gradmode-lint", "eng/warm.py", cwd=root).stdout.splitlines()
    assert len(concise) == 1 and concise[0].startswith("eng/warm.py:3:10: GM101 ")
    assert text[0] == concise[0] and text[1].startswith("    ") and "matches `*warmup*`" in text[1]


def test_github_annotations_have_the_exact_format(tmp_path):
    root = _project(tmp_path)
    out = run_script("gradmode-lint", "eng/warm.py", "--format", "github", cwd=root).stdout.splitlines()
    assert out == [
        "::warning title=gradmode-lint (GM101),file=eng/warm.py,line=3,col=10::GM101 `with torch.inference_mode()` "
        "in warm path `warmup()`"]


def test_stdin_findings_carry_the_given_filename(tmp_path):
    root = _project(tmp_path)
    proc = run_script("gradmode-lint", "-", "--stdin-filename", "eng/unsaved.py", "--format", "concise", cwd=root,
                      input=WARM.replace("model()", "model(1)"))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("eng/unsaved.py:3:10: GM101 "), proc.stdout
    assert not (root / "eng" / "unsaved.py").exists()
    missing = run_script("gradmode-lint", "-", cwd=root, input=WARM)
    assert missing.returncode == 2 and "--stdin-filename" in missing.stderr


def test_stdin_filename_alone_reads_stdin_and_conflicts_with_other_paths(tmp_path):
    root = _project(tmp_path)
    alone = run_script("gradmode-lint", "--stdin-filename", "eng/unsaved.py", "--format", "concise", cwd=root,
                       input=WARM)
    assert alone.returncode == 1 and alone.stdout.startswith("eng/unsaved.py:3:10: GM101 "), alone
    for args, why in [(["eng/warm.py", "--stdin-filename", "eng/x.py"], "--stdin-filename names the file read"),
                      (["-", "eng/warm.py", "--stdin-filename", "eng/x.py"], "must be the only path"),
                      (["-", "eng/warm.py"], "must be the only path")]:
        proc = run_script("gradmode-lint", *args, cwd=root, input=WARM)
        assert proc.returncode == 2 and why in proc.stderr and proc.stdout == "", (args, proc)


@pytest.mark.parametrize("form", ["json", "sarif", "github"])
def test_statistics_is_refused_beside_a_machine_format(tmp_path, form):
    root = _project(tmp_path)
    proc = run_script("gradmode-lint", ".", "--statistics", "--format", form, cwd=root)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert f"--statistics is for the text formats, not --format {form}" in proc.stderr


def test_sarif_uris_are_percent_encoded(tmp_path):
    import json
    import urllib.parse

    root = _project(tmp_path)
    odd = root / "we#ird?" / "a:b,c%2F d.py"
    odd.parent.mkdir()
    odd.write_text(WARM)
    (odd.parent / "__init__.py").write_text("")
    proc = run_script("gradmode-lint", ".", "--format", "sarif", cwd=root)
    assert proc.returncode == 1, proc.stderr
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(proc.stdout)["runs"][0]["results"]}
    assert "we%23ird%3F/a%3Ab%2Cc%252F%20d.py" in uris, uris
    assert all(urllib.parse.urlsplit(u).scheme == "" and not urllib.parse.urlsplit(u).fragment for u in uris)
    assert {urllib.parse.unquote(u) for u in uris} >= {"we#ird?/a:b,c%2F d.py", "eng/warm.py"}


def test_fix_runs_the_codemod(tmp_path):
    root = _project(tmp_path)
    proc = run_script("gradmode-lint", "eng/warm.py", "--fix", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "inference_mode" not in (root / "eng" / "warm.py").read_text()
    assert "inference_mode" in (root / "eng" / "other.py").read_text()  # only the given file is rewritten


def test_fix_takes_the_shared_options_as_parsed_and_refuses_report_options(tmp_path):
    root = _project(tmp_path)
    refused = run_script("gradmode-lint", "--fix", "-o", "report.txt", "eng/warm.py", cwd=root)
    assert refused.returncode == 2 and "--fix does not take --output" in refused.stderr, refused
    for stdin in (["-", "eng/warm.py"], ["--stdin-filename", "eng/x.py", "eng/warm.py"]):  # fixed the file,
        refused = run_script("gradmode-lint", "--fix", *stdin, cwd=root)                 # or dropped the option
        assert refused.returncode == 2 and "--fix does not take " in refused.stderr, refused
    assert "inference_mode" in (root / "eng" / "warm.py").read_text() and not (root / "report.txt").exists()
    ignored = run_script("gradmode-lint", "--fix", "--format", "concise", "--no-cache", "--ignore", "GM101",
                         "-j", "1", "eng/warm.py", cwd=root)
    assert ignored.returncode == 0, ignored
    assert "inference_mode" in (root / "eng" / "warm.py").read_text()  # --ignore reached the codemod
    (root / "pyproject.toml").write_text('[tool.gradmode]\nexclude = ["eng/warm.py"]\n')
    forced = run_script("gradmode-lint", "--fix", "--force-exclude", "eng/warm.py", cwd=root)
    assert forced.returncode == 0 and "inference_mode" in (root / "eng" / "warm.py").read_text(), forced
    diff = run_script("gradmode-lint", "--diff", "eng/warm.py", cwd=root)  # as ruff's check --diff
    assert diff.returncode == 1 and "-    with torch.inference_mode():" in diff.stdout, diff
    assert "GM101" not in diff.stdout  # the fixes only: the diff can be piped to `git apply`
    (root / "eng" / "late.py").write_text("import torch\n"
                                          "def kernel_warmup(m):\n    prime(m)\n"
                                          "def run(m):\n    with torch.inference_mode():\n        kernel_warmup(m)\n"
                                          "        print(m)\n")
    nothing = run_script("gradmode-lint", "--diff", "eng/late.py", cwd=root)  # only an unsafe fix: no diff
    assert nothing.returncode == 0 and nothing.stdout == "", nothing
    assert "inference_mode" in (root / "eng" / "warm.py").read_text()
    fixed = run_script("gradmode-lint", "--fix", "--format=concise", "--select", "GM1", "--no-force-exclude",
                       "eng/warm.py", cwd=root)
    assert fixed.returncode == 0, fixed
    assert "inference_mode" not in (root / "eng" / "warm.py").read_text()


def test_fix_and_diff_take_an_option_with_one_flag_only(tmp_path):
    """--no-libraries has no --libraries twin: handing the options to the codemod as a command line
    again asked for one (an IndexError, exit 2); the CLI now gives the codemod's run the options as parsed."""
    root = _project(tmp_path)
    diff = run_script("gradmode-lint", "--diff", "--no-libraries", "--no-cache", "eng/warm.py", cwd=root)
    assert diff.returncode == 1 and "-    with torch.inference_mode():" in diff.stdout, diff
    assert "Traceback" not in diff.stderr
    fixed = run_script("gradmode-lint", "--fix", "--no-libraries", "--no-cache", "eng/warm.py", cwd=root)
    assert fixed.returncode == 0 and "inference_mode" not in (root / "eng" / "warm.py").read_text(), fixed


def test_color_follows_the_flag_and_no_color(tmp_path):
    root = _project(tmp_path)
    always = run_script("gradmode-lint", "eng/warm.py", "--color", "always", cwd=root).stdout
    never = run_script("gradmode-lint", "eng/warm.py", "--color", "never", cwd=root).stdout
    auto = run_script("gradmode-lint", "eng/warm.py", cwd=root).stdout  # not a terminal
    assert "\033[" in always and "\033[" not in never and auto == never


def test_per_file_ignores(tmp_path):
    root = _project(tmp_path, '[tool.gradmode]\nper-file-ignores = {"eng/other.py" = ["GM1"]}\n')
    proc = run_script("gradmode-lint", ".", "--format", "concise", cwd=root)
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == ["eng/warm.py"], proc.stdout
    bad = _project(tmp_path / "bad", '[tool.gradmode]\nper-file-ignores = ["GM1"]\n')
    proc = run_script("gradmode-lint", ".", cwd=bad)
    assert proc.returncode == 2 and "per-file-ignores must be a table" in proc.stderr


def test_bad_force_exclude_and_diff_with_a_report_option_are_errors_that_change_nothing(tmp_path):
    root = _project(tmp_path, '[tool.gradmode]\nforce-exclude = "yes"\n')
    before = (root / "eng" / "warm.py").read_text()
    for front_end in ("gradmode-lint", "gradmode-fix"):
        proc = run_script(front_end, ".", cwd=root)
        assert proc.returncode == 2 and "force-exclude must be true or false" in proc.stderr, proc
        assert "Traceback" not in proc.stderr
    (root / "pyproject.toml").write_text("[tool.gradmode]\n")
    proc = run_script("gradmode-lint", "--diff", "--format", "json", ".", cwd=root)
    assert proc.returncode == 2 and "--diff does not take --format" in proc.stderr and proc.stdout == "", proc
    assert (root / "eng" / "warm.py").read_text() == before


def test_path_settings_count_from_the_configuration_folder_whatever_the_cwd(tmp_path):
    """exclude, per-file-ignores and module-globs name paths from the pyproject.toml's folder, as in ruff:
    run from a subfolder, on a file, on an absolute path, or fixed, the result is the same."""
    root = _project(tmp_path, '[tool.gradmode]\nextend-exclude = ["./eng/gen", "./build"]\n'
                              'module-globs = ["eng/boot.py"]\n'
                              '[tool.gradmode.per-file-ignores]\n"eng/other.py" = ["GM101"]\n"repo/*" = ["GM1"]\n')
    (root / "eng" / "gen").mkdir()
    (root / "eng" / "gen" / "made.py").write_text(WARM)
    for build in (root / "build", root / "eng" / "build"):  # `./build` is the one at the top only
        build.mkdir()
        (build / "step.py").write_text(WARM)
    (root / "eng" / "boot.py").write_text("import torch\ndef load(m):\n    with torch.inference_mode():\n        m()\n")
    eng = root / "eng"
    expected = {"eng/warm.py", "eng/boot.py", "eng/build/step.py"}  # `repo/*`, reaching above, matches nothing
    for cwd, args in ((root, ["."]), (eng, ["."]), (eng, [str(eng)]), (tmp_path, [str(root)])):
        proc = run_script("gradmode-lint", *args, "--format", "json", "--no-cache", cwd=cwd)
        found = {os.path.relpath(os.path.join(cwd, f["path"]), root).replace(os.sep, "/")
                 for f in json.loads(proc.stdout)["findings"]}
        assert found == expected, (cwd, args, proc.stdout)
    diff = run_script("gradmode-fix", "--diff", "other.py", "gen/made.py", "--no-cache", cwd=eng)
    assert "other.py" not in diff.stdout and "boot.py" not in diff.stdout  # not given; other.py is ignored
    assert "made.py" in diff.stdout  # named on the command line: linted and fixed though excluded, as in ruff


def test_an_anchored_exclude_on_the_command_line_without_settings(tmp_path):
    """No [tool.gradmode]: `--exclude ./build` is the build folder of the current one, not src/build."""
    for folder in ("build", "src/build"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "w.py").write_text(WARM)
    for args in (["."], [str(tmp_path)]):
        proc = run_script("gradmode-lint", *args, "--exclude", "./build", "--format", "json", "--no-cache",
                          cwd=tmp_path)
        found = {os.path.relpath(os.path.join(tmp_path, f["path"]), tmp_path)
                 for f in json.loads(proc.stdout)["findings"]}
        assert found == {os.path.join("src", "build", "w.py")}, (args, proc.stdout)


def test_with_no_settings_path_options_count_from_the_cwd_and_the_cache_knows_it(tmp_path):
    (tmp_path / "warm").mkdir()
    target = tmp_path / "warm" / "w.py"
    target.write_text("import torch\ndef load(m):\n    with torch.inference_mode():\n        m()\n")
    cache = tmp_path / "cache"
    for cwd, found in ((tmp_path, 1), (tmp_path / "warm", 0), (tmp_path, 1)):
        for where in (["--cache-dir", str(cache)], ["--no-cache"]):
            proc = run_script("gradmode-lint", str(target), "--module-globs", "warm/*.py", "--format", "json",
                              *where, cwd=cwd)
            assert len(json.loads(proc.stdout)["findings"]) == found, (cwd, where, proc.stdout)


def test_a_package_through_a_symbolic_link_takes_the_settings_above_the_link(tmp_path):
    """As flake8 and ruff: the folder a path is given in decides the settings, not where a link leads."""
    shared = write_package(tmp_path / "shared", {"lib/warm.py": WARM.replace("warmup", "prime_kernels")})
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.gradmode]\npath-patterns = ["*prime*"]\n')
    (project / "lib").symlink_to(shared / "lib")
    for args in (["lib"], ["lib/warm.py"]):
        proc = run_script("gradmode-lint", *args, "--format", "concise", "--no-cache", cwd=project)
        assert proc.returncode == 1 and "prime_kernels()" in proc.stdout, (args, proc.stdout, proc.stderr)


def test_a_broken_pyproject_is_an_error_naming_the_file(tmp_path):
    root = _project(tmp_path, "[tool.gradmode\nx = 1\n")
    proc = run_script("gradmode-lint", ".", cwd=root)
    assert proc.returncode == 2
    assert "pyproject.toml: cannot read config:" in proc.stderr and "Traceback" not in proc.stderr


def test_config_comes_from_the_linted_paths_not_the_cwd(tmp_path):
    root = _project(tmp_path, '[tool.gradmode]\nignore = ["GM101"]\n')
    inside = run_script("gradmode-lint", ".", cwd=root)
    elsewhere = run_script("gradmode-lint", str(root), cwd=tmp_path)
    assert inside.returncode == elsewhere.returncode == 0, (inside.stdout, elsewhere.stdout)


def test_a_closed_pipe_is_not_a_traceback():
    proc = subprocess.run(f"{sys.executable} -m lints rules | head -1", shell=True, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.startswith("GM101") and "Traceback" not in proc.stderr


def _many_findings(tmp_path, count: int = 400):
    return write_package(tmp_path / "repo", {f"engine/warm{n}.py": WARM for n in range(count)})


def test_a_reader_that_leaves_early_is_not_a_traceback(tmp_path):
    """Output far larger than a pipe's buffer, and `head` leaves after one line: the write fails."""
    root = _many_findings(tmp_path)
    proc = subprocess.run(f"{sys.executable} -m lints . --no-cache | head -1; exit ${{PIPESTATUS[0]}}",
                          shell=True, executable="/bin/bash", cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.stdout.count("\n") == 1 and "GM101" in proc.stdout
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_closed_output_streams_keep_the_exit_status(tmp_path):
    root = _many_findings(tmp_path, 3)
    for redirect, stream in ((">&-", "stdout"), ("2>&-", "stderr")):
        proc = subprocess.run(f"{sys.executable} -m lints . --no-cache {redirect}; echo status=$? >&2", shell=True,
                              executable="/bin/bash", cwd=root, capture_output=True, text=True, timeout=300)
        assert "status=1" in proc.stderr, (stream, proc.stderr)  # findings: 1, as with open streams
        assert "Traceback" not in proc.stderr + proc.stdout, (stream, proc.stderr)


SERVE_UNDER_INFERENCE = ("import torch\n"
                         "@torch.inference_mode()\n"
                         "def serve(model):\n"
                         "    return model()\n")


def _loose(tmp_path, marker: bool):
    """A file beside an unrelated one that serves under inference mode; a project only with ``marker``."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    (folder / "warm.py").write_text(WARM)
    (folder / "serve.py").write_text(SERVE_UNDER_INFERENCE)
    if marker:
        (folder / "pyproject.toml").write_text("")
    return folder


def _lint_without_cache_env(*args, cwd, input=None):
    env = {k: v for k, v in os.environ.items() if k != "GRADMODE_CACHE_DIR"}
    return subprocess.run([sys.executable, "-m", "lints", *args], cwd=cwd, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(ROOT)}, input=input, timeout=300)


@pytest.mark.parametrize("stdin", [False, True])
def test_a_file_outside_any_project_is_linted_alone_and_leaves_no_cache(tmp_path, stdin):
    """No pyproject.toml, .git or package above it: its folder (/tmp, a home folder) is not walked."""
    folder = _loose(tmp_path, marker=False)
    args = ["-", "--stdin-filename", "warm.py"] if stdin else ["warm.py"]
    proc = _lint_without_cache_env(*args, "--format", "concise", cwd=folder, input=WARM if stdin else None)
    assert proc.returncode == 1 and proc.stdout.startswith("warm.py:3:10: GM101 "), proc.stdout + proc.stderr
    assert "serve()" not in proc.stderr and "the default" in proc.stderr
    assert not (folder / ".gradmode_cache").exists()


@pytest.mark.parametrize("marker, args", [(True, ["warm.py"]), (False, ["."])])
def test_a_file_of_a_project_or_a_folder_given_is_linted_with_its_neighbours(tmp_path, marker, args):
    """The look-alikes: with a pyproject.toml, or given the folder itself, the other module counts: it
    serves under inference mode, so warmup's inference mode matches serving."""
    folder = _loose(tmp_path, marker=marker)
    proc = _lint_without_cache_env(*args, "--format", "concise", cwd=folder)
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr
    assert "serve()" in proc.stderr
    assert (folder / ".gradmode_cache").is_dir()


def test_a_file_given_beside_the_folder_holding_it_counts_once(tmp_path):
    root = _project(tmp_path)
    proc = run_script("gradmode-lint", ".", "eng/warm.py", "./eng/warm.py", "--format", "concise", cwd=root)
    assert proc.returncode == 1, proc.stderr
    assert "2 finding(s) in 3 file(s)" in proc.stderr, proc.stderr
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == ["eng/other.py", "eng/warm.py"], proc.stdout


@pytest.mark.parametrize("front_end", ["lints.cli", "lints.codemod"])
def test_a_folder_given_is_walked_once_per_run_and_afresh_by_the_next(tmp_path, monkeypatch, capsys, front_end):
    """The CLI walked a folder given three times (nested projects, the files asked for, the project's
    files): +35% on a tree of 20,000 folders. A later run in the same process sees files added since."""
    import importlib

    from lints import walk

    main = importlib.import_module(front_end).main
    root = _project(tmp_path, "[tool.gradmode]\n")
    walks = []  # each folder a walk lists
    real_scandir = os.scandir

    def counting_scandir(top=".", *args, **kwargs):
        if isinstance(top, (str, os.PathLike)):
            walks.append(os.path.abspath(top))
        return real_scandir(top, *args, **kwargs)

    monkeypatch.setattr(walk.os, "scandir", counting_scandir)
    monkeypatch.chdir(root)
    args = ["-q", "--no-cache", "--diff", "."] if front_end == "lints.codemod" else ["-q", "--no-cache", "."]
    assert main(args) == 1
    assert walks.count(str(root)) == 1, walks
    assert "eng/new.py" not in capsys.readouterr().out
    (root / "eng" / "new.py").write_text(WARM)
    assert main(args) == 1
    assert walks.count(str(root)) == 2, walks
    assert "eng/new.py" in capsys.readouterr().out


def test_fix_takes_unsafe_fixes_as_ruff_does(tmp_path):
    """`gradmode-lint --fix --unsafe-fixes` was refused as an unknown argument: only the codemod took it."""
    root = write_package(tmp_path / "repo", {"eng/run.py": (
        "import torch\ndef warmup(model):\n    model()\ndef run(model):\n"
        "    with torch.inference_mode():\n        warmup(model)\n        model()\n")})
    safe_only = run_script("gradmode-lint", "--fix", "--no-cache", "eng/run.py", cwd=root)
    assert safe_only.returncode == 1 and "inference_mode" in (root / "eng" / "run.py").read_text(), safe_only
    unsafe = run_script("gradmode-lint", "--fix", "--unsafe-fixes", "--no-cache", "eng/run.py", cwd=root)
    assert unsafe.returncode == 0 and "inference_mode" not in (root / "eng" / "run.py").read_text(), unsafe
    alone = run_script("gradmode-lint", "--unsafe-fixes", "eng/run.py", cwd=root)
    assert alone.returncode == 2 and "--unsafe-fixes is for --fix" in alone.stderr, alone


def _markerless_package(tmp_path, sibling: bool):
    """An unzipped package, no project marker above it: its warmup calls a helper module of the folder
    (``sibling``) or its own."""
    folder = tmp_path / "unzipped"
    (folder / "eng").mkdir(parents=True)
    (folder / "eng" / "__init__.py").write_text("")
    helper = "helpers" if sibling else "eng.helpers"
    (folder / ("helpers.py" if sibling else "eng/helpers.py")).write_text(
        "import torch\n"
        "def run(model):\n"
        "    return model(torch.zeros(1))\n")
    (folder / "eng" / "warm.py").write_text(
        "import torch\n"
        f"from {helper} import run\n"
        "def warmup(model):\n"
        "    with torch.inference_mode():\n"
        "        run(model)\n")
    return folder


def test_a_package_without_a_marker_is_cached_in_the_user_cache_folder(tmp_path):
    """Like a project: the second run is the cached result, and nothing is written beside the package
    (its folder may be /tmp or a home folder)."""
    folder = _markerless_package(tmp_path, sibling=False)
    user_cache = tmp_path / "user-cache"
    env = {k: v for k, v in os.environ.items() if k != "GRADMODE_CACHE_DIR"}
    env.update(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(user_cache))
    runs = [subprocess.run([sys.executable, "-m", "lints", "eng", "--format", "json"], cwd=folder,
                           capture_output=True, text=True, env=env, timeout=300) for _ in range(2)]
    assert [r.returncode for r in runs] == [1, 1], runs[0].stderr
    assert runs[0].stdout == runs[1].stdout and '"GM101"' in runs[0].stdout
    (cache,) = (user_cache / "gradmode-lint" / "projects").iterdir()
    assert any(cache.iterdir())
    assert sorted(p.name for p in folder.iterdir()) == ["eng"]
    assert not (folder / "eng" / ".gradmode_cache").exists()


@pytest.mark.parametrize("sibling", [False, True])
def test_a_markerless_package_brings_in_what_it_imports_from_its_folder(tmp_path, monkeypatch, sibling):
    """Only a file that names another module of the folder is parsed for its imports (an unzipped
    sglang alone in its folder: none of its 2,500 files)."""
    from lints import loose_files

    parsed = []
    reader = loose_files._imported_names
    monkeypatch.setattr(loose_files, "_imported_names", lambda source, folder: parsed.append(source.path)
                        or reader(source, folder))
    folder = _markerless_package(tmp_path, sibling)
    (folder / "unrelated.py").write_text("import os\n")
    package = sorted(str(p) for p in (folder / "eng").glob("*.py"))
    members, whole = loose_files.loose_project(package, str(folder), {}, 1 << 20)
    expected = package + ([str(folder / "helpers.py")] if sibling else [])
    assert sorted(members) == sorted(expected) and whole
    assert parsed == ([str(folder / "eng" / "warm.py")] if sibling else [])


def test_a_markerless_package_whose_user_cache_cannot_be_written_is_linted_all_the_same(tmp_path):
    """A user cache folder that is a file (or read-only): a warning, the same findings, nothing beside it."""
    folder = _markerless_package(tmp_path, sibling=False)
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the user cache folder would be\n")
    env = {k: v for k, v in os.environ.items() if k != "GRADMODE_CACHE_DIR"}
    env.update(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(blocked))
    proc = subprocess.run([sys.executable, "-m", "lints", "eng", "--format", "concise"], cwd=folder,
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1 and "GM101" in proc.stdout, proc.stdout + proc.stderr
    assert "warning: cannot write cache" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["eng"]
