"""The documentation site builds with `mkdocs build --strict` (no broken link or anchor, every page in the nav),
and the README's links into it resolve; nothing is left in the temporary directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_mkdocs_build_strict() -> None:
    with tempfile.TemporaryDirectory(prefix="shardproxy-site-") as site:
        done = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", site],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert (Path(site) / "index.html").exists()


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _nav_pages(value)]
    return []


def test_every_page_is_in_the_nav() -> None:
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    pages = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert sorted(pages) == sorted(_nav_pages(nav))


def test_readme_links_resolve() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links into docs/"
    missing = [t for t in targets if not t.startswith(("http://", "https://")) and not (REPO / t).exists()]
    assert not missing


def test_readme_is_a_first_page() -> None:
    """Well under 200 lines, and it still holds the two commands CI and a newcomer start from."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 150
    assert ".venv/bin/shardproxy demo" in text and "\nbash .ci/run\n" in text
