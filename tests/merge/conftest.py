"""`frames_impl`: a test of merge.frames' per-row steps runs on both forms of them, the Python code and the C helpers
(merge._cframes), which must give the same answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.c_helpers import c_helper


@pytest.fixture(params=["python", "c"])
def frames_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    import merge.frames
    import merge.raw

    c = c_helper("merge._cframes") if request.param == "c" else None
    monkeypatch.setattr(merge.frames, "C", c)
    merge.raw._PLANS.clear()  # keys made with the other form
    yield request.param
    merge.raw._PLANS.clear()
