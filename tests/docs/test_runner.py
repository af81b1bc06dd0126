"""The documentation example runner itself (tests/docs/examples.py): statement splitting, the mysql client's
table drawing and the ```mysql `not run` rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.examples import examples, statements, table

SPLITS = [
    ("SELECT 1;", ["SELECT 1"]),
    ("USE a;\nSELECT 1;   -- a comment\n", ["USE a", "SELECT 1"]),
    ("SELECT 'a -- b';", ["SELECT 'a -- b'"]),
    ("SELECT 1\n  FROM t;", ["SELECT 1\n  FROM t"]),
    ("-- only a comment\nSELECT 2;", ["SELECT 2"]),
]


@pytest.mark.parametrize(("sql", "expected"), SPLITS)
def test_statements(sql: str, expected: list[str]) -> None:
    assert statements(sql) == expected


def test_statement_without_semicolon_is_refused() -> None:
    with pytest.raises(ValueError, match="closing ';'"):
        statements("SELECT 1")


def test_table_aligns_numbers_right_and_shows_null() -> None:
    # (type codes: 3 LONG, 253 VAR_STRING)
    drawn = table([("id", 3), ("name", 253)], [(b"1", b"alice"), (b"22", None)])
    assert drawn == "\n".join(
        [
            "+----+-------+",
            "| id | name  |",
            "+----+-------+",
            "|  1 | alice |",
            "| 22 | NULL  |",
            "+----+-------+",
        ]
    )


CASES = [
    ("```sql\nSELECT 1;\n```\n\n```text\nx\n```\n", [("SELECT 1;", "x")]),
    ("```sql\nSELECT 1;\n```\n\nprose\n\n```text\nx\n```\n", [("SELECT 1;", None)]),
    ("<!-- not run: needs a cluster -->\n```mysql\nSELECT 1;\n```\n", []),
    ("```yaml\na: 1\n```\n```sql\nSELECT 2;\n```\n", [("SELECT 2;", None)]),
]


@pytest.mark.parametrize(("markdown", "expected"), CASES)
def test_examples(tmp_path: Path, markdown: str, expected: list[tuple[str, str | None]]) -> None:
    page = tmp_path / "page.md"
    page.write_text(markdown, encoding="utf-8")
    assert [(e.sql, e.expected) for e in examples(page)] == expected


def test_shown_only_block_needs_its_reason(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```mysql\nSELECT 1;\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not run"):
        examples(page)
