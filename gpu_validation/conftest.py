"""gpu_validation: register the `gpu` marker here, so no pyproject/pytest.ini change is needed."""
from __future__ import annotations

import os

import pytest


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpu: needs a CUDA GPU (skips cleanly without one); run with `tox -e gpu` or `pytest gpu_validation`",
    )


@pytest.fixture(scope="session")
def upstream_files():
    """The pinned upstream SGLang files (fetch_upstream.py): fetched here if absent and pip can download them.

    Skips, saying how to get them, when they are absent and cannot be fetched (no network, or
    GRADMODE_NO_FETCH=1).
    """
    from gpu_validation import fetch_upstream

    how = f"run `{fetch_upstream.HOW_TO_GET}` (pip download of the pinned sglang wheels)"
    if fetch_upstream.missing():
        if os.environ.get("GRADMODE_NO_FETCH") == "1":
            pytest.skip(f"upstream SGLang files absent and GRADMODE_NO_FETCH=1: {how}")
        try:
            fetch_upstream.fetch(quiet=True, pip_args=("--timeout", "15", "--retries", "1"))
        except (RuntimeError, OSError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            pytest.skip(f"upstream SGLang files absent and could not be fetched ({first}): {how}")
    return fetch_upstream
