"""gpu_validation: register the `gpu` marker here, so no pyproject/pytest.ini change is needed."""
from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpu: needs a CUDA GPU (skips cleanly without one); run with `tox -e gpu` or `pytest gpu_validation`",
    )
