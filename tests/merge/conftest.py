"""`frames_impl`: a test of merge.frames' per-row steps runs on both forms of them, the Python code and the C helpers
(merge._cframes), which must give the same answers (issue 15)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator

import pytest


@pytest.fixture(params=["python", "c"])
def frames_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    import merge.frames
    import merge.raw

    c = None
    if request.param == "c":
        try:
            c = importlib.import_module("merge._cframes")
        except ImportError:
            if os.environ.get("SHARDPROXY_EXPECT_COMPILED") in ("0", "1"):  # .ci/run: both builds have the helpers
                pytest.fail("merge._cframes is not built (setup.py builds it where a C compiler is)")
            pytest.skip("merge._cframes is not built here (no C compiler at install)")
    monkeypatch.setattr(merge.frames, "C", c)
    merge.raw._PLANS.clear()  # keys made with the other form
    yield request.param
    merge.raw._PLANS.clear()
