import pytest

from .helpers import run_module


@pytest.fixture
def run(tmp_path):
    """Run `python -m ...` in tmp_path (own cache dir, no pyproject above it)."""
    def _run(*args, cwd=None, input=None):
        return run_module(*args, cwd=cwd or tmp_path, input=input)
    return _run
