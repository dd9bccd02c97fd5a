"""A real `pre-commit try-repo` run of our hooks in a throwaway git repository."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from .helpers import FIXTURES, ROOT

# `python -m pre_commit` from this interpreter: CI runs `.venv/bin/python -m pytest` without the venv on PATH.
pytestmark = [pytest.mark.slow,  # real `pre-commit try-repo` runs: the full suite (CI) runs them
              pytest.mark.skipif(importlib.util.find_spec("pre_commit") is None or shutil.which("git") is None,
                                 reason="pre-commit or git not installed")]


def sh(*args, cwd, check=True, env=None):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=check, env=env, timeout=600)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory):
    """This project as committed files (try-repo ignores untracked ones)."""
    path = tmp_path_factory.mktemp("hookrepo")
    for name in ("lints", "codemods"):
        shutil.copytree(ROOT / name, path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", ".pre-commit-hooks.yaml", "README.md"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, path / name)
    sh("git", "init", "-q", cwd=path)
    sh("git", "add", ".", cwd=path)
    sh("git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false",
       "commit", "-qm", "hooks", cwd=path)
    return path


@pytest.fixture(scope="module")
def repo(tmp_path_factory, hook_repo):
    path = tmp_path_factory.mktemp("precommit")
    sh("git", "init", "-q", cwd=path)
    sh("git", "config", "user.email", "t@example.com", cwd=path)
    sh("git", "config", "user.name", "t", cwd=path)
    sh("git", "config", "commit.gpgsign", "false", cwd=path)
    shutil.copy(FIXTURES / "fix" / "sglang.in.py", path / "runner.py")
    (path / "README.txt").write_text("not python\n")
    sh("git", "add", ".", cwd=path)
    return path, hook_repo


def try_repo(repos, hook, *extra):
    repo, hook_repo = repos
    env = dict(os.environ, PRE_COMMIT_HOME=str(repo.parent / "pre-commit-home"))
    return sh(sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), hook, *extra, cwd=repo, check=False, env=env)


def test_lint_hook_fails_on_findings_then_fix_hook_fixes(repo):
    lint = try_repo(repo, "gradmode-lint", "--all-files")
    assert lint.returncode == 1, lint.stdout + lint.stderr
    assert "GM101" in lint.stdout and "runner.py" in lint.stdout
    fix = try_repo(repo, "gradmode-fix", "--all-files")
    assert fix.returncode == 1  # files were modified: pre-commit fails the run, as for any fixer
    assert "torch.inference_mode" not in (repo[0] / "runner.py").read_text()
    sh("git", "add", ".", cwd=repo[0])
    again = try_repo(repo, "gradmode-lint", "--all-files")
    assert again.returncode == 0, again.stdout


def test_hook_with_no_python_files_passes(repo):
    proc = try_repo(repo, "gradmode-lint", "--files", "README.txt")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hooks_leave_what_the_project_excludes(tmp_path, hook_repo):
    """pre-commit names the files it hands over: the hooks pass --force-exclude, so the project's exclude
    still applies (as ruff's hooks do); run by hand on the same file, the CLI lints it."""
    path = tmp_path / "repo"
    path.mkdir()
    sh("git", "init", "-q", cwd=path)
    (path / "pyproject.toml").write_text('[tool.gradmode]\nextend-exclude = ["vendored"]\n')
    (path / "vendored").mkdir()
    shutil.copy(FIXTURES / "fix" / "sglang.in.py", path / "vendored" / "runner.py")
    sh("git", "add", ".", cwd=path)
    before = (path / "vendored" / "runner.py").read_text()
    for hook in ("gradmode-lint", "gradmode-fix"):
        proc = try_repo((path, hook_repo), hook, "--all-files")
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (path / "vendored" / "runner.py").read_text() == before
    by_hand = subprocess.run([sys.executable, "-m", "lints", "vendored/runner.py", "--no-cache"], cwd=path,
                             capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert by_hand.returncode == 1 and "GM101" in by_hand.stdout
    forced = subprocess.run([sys.executable, "-m", "lints", "vendored/runner.py", "--no-cache", "--force-exclude"],
                            cwd=path, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                            timeout=300)
    assert forced.returncode == 0 and "GM101" not in forced.stdout, forced.stdout + forced.stderr
