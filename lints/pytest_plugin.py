"""pytest plugin of gradmode-lint (entry point ``pytest11``: ``gradmode``): the ``inference_tensor_watch`` fixture.

::

    def test_warmup_keeps_no_inference_tensors(inference_tensor_watch):
        runner = build_runner()
        with inference_tensor_watch.watch():
            runner.warmup()
        inference_tensor_watch.assert_none_kept(named={"runner": runner}, modules=["engine.pools"])

pytest loads this module in every project where gradmode-lint is installed, torch or not: torch is imported
only when a test asks for the fixture (``lints.runtime`` needs it).
"""
from __future__ import annotations

import pytest


@pytest.fixture
def inference_tensor_watch():
    """A ``lints.runtime.Recorder``: ``with inference_tensor_watch.watch(): ...`` records the inference tensors
    made in the block (where, and under which ``torch.inference_mode`` entry); ``.kept(...)`` lists those
    still reachable from the given roots; ``.assert_none_kept(...)`` fails the test with that report."""
    pytest.importorskip("torch", reason="the inference_tensor_watch fixture needs torch")
    from lints.runtime import Recorder

    yield Recorder()
