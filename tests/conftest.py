import os
import tempfile

import pytest

from .helpers import run_module

# The user's cache folder (installed libraries' summaries, packages without a project marker) is one
# of the session's own: tests never read or write the home folder's.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="gradmode-user-cache-")


@pytest.fixture
def run(tmp_path):
    """Run `python -m ...` in tmp_path (own cache dir, no pyproject above it)."""
    def _run(*args, cwd=None, input=None):
        return run_module(*args, cwd=cwd or tmp_path, input=input)
    return _run


# Modules whose tests run the front ends end to end in processes of their own (the CLI, flake8, the
# codemod, the language server, hostile checkouts): marked ``e2e``, left out of the quick subset
# (`-m "not slow and not e2e"`), run by the full suite.
END_TO_END_MODULES = frozenset({
    "test_bad_input", "test_cli", "test_cli_options", "test_codemod", "test_conventions",
    "test_conventions_output", "test_flake8", "test_hardening", "test_hostile_codemod", "test_hostile_files",
    "test_server",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module is not None and item.module.__name__.rpartition(".")[2] in END_TO_END_MODULES:
            item.add_marker(pytest.mark.e2e)
