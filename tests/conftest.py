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
