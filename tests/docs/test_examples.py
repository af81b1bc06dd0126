"""Every SQL example of the README and of docs/ answers what the page shows (tests/docs/examples.py), against
the shipped conf/ on throwaway MariaDB servers: the documentation cannot drift from the proxy."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.examples import PAGES, REPO, Demo, examples, run_page, start_demo

RUN_PAGES = [page for page in PAGES if examples(page)]


def test_pages_have_examples() -> None:
    """(The runner reads the pages it should: a renamed fence would otherwise check nothing.)"""
    names = {page.relative_to(REPO).as_posix() for page in RUN_PAGES}
    assert {"README.md", "docs/tour.md", "docs/distsql.md"} <= names


@pytest.fixture(scope="module")
def demo() -> Iterator[Demo]:
    with tempfile.TemporaryDirectory(prefix="shardproxy-docs-") as work:
        running = start_demo(Path(work))
        try:
            yield running
        finally:
            running.stop()


@pytest.mark.integration
@pytest.mark.parametrize("page", RUN_PAGES, ids=[p.relative_to(REPO).as_posix() for p in RUN_PAGES])
def test_page_examples_answer_as_shown(demo: Demo, page: Path) -> None:
    wrong = []
    for example, actual in run_page(demo, page):
        if example.expected is not None and actual != example.expected:
            wrong.append(f"{page.name}:{example.line}\n--- shown\n{example.expected}\n--- answered\n{actual}")
        elif example.expected is None and any(line.startswith("ERROR ") for line in actual.splitlines()):
            wrong.append(f"{page.name}:{example.line} fails, and no ```text block shows it:\n{actual}")
    assert not wrong, "\n\n".join(wrong) + "\n(python3 -m tests.docs.examples --write rewrites the shown output)"
