"""LIKE over an encrypted column's LIKE query column: the rewritten pattern must match the digest of a value exactly
when the client's pattern matches the value (MariaDB's LIKE: ``%``, ``_`` and the default escape, a backslash), for
literal and prepared patterns, whatever characters the digests hold (``[`` digests to a backslash)."""

from __future__ import annotations

import re

import pytest

from protocol.errors import ServerError
from routing.config import load_yaml
from routing.encrypt.algorithms import create_encryptor
from routing.encrypt.rewrite import rewrite_encrypted
from routing.encrypt.rule import load_encrypt_rule
from routing.like import like_to_regex
from routing.parse import literal_value

MASKS = {"full": "65535", "default": "4093"}  # (4093, ShardingSphere's default, folds some characters together)


def _rule(mask: str) -> object:
    return load_encrypt_rule(load_yaml(f"""
- !ENCRYPT
  tables:
    t_user:
      columns:
        name:
          cipher: {{name: name_cipher, encryptorName: aes}}
          likeQuery: {{name: name_like, encryptorName: like}}
  encryptors:
    aes: {{type: AES, props: {{aes-key-value: k, digest-algorithm-name: SHA-1}}}}
    like: {{type: CHAR_DIGEST_LIKE, props: {{mask: {mask}, dict: 三}}}}
""")[0])


RULES = {name: _rule(mask) for name, mask in MASKS.items()}
LIKE = {name: create_encryptor("CHAR_DIGEST_LIKE", {"mask": mask, "dict": "三"}, key="like")
        for name, mask in MASKS.items()}  # fmt: skip


def _matches(pattern: str, value: str) -> bool:
    """MariaDB's LIKE under a binary collation."""
    return re.compile(like_to_regex(pattern).pattern, re.S).match(value) is not None


# (the pattern as the client's parameter, a value, whether MariaDB's LIKE matches it)
CASES = [
    ("pct\\%", "pct%", True),  # \% is a literal %
    ("pct\\%", "pctx", False),
    ("pct\\%", "pct", False),
    ("a\\_b", "a_b", True),  # \_ a literal _
    ("a\\_b", "axb", False),
    ("a\\\\%", "a\\x", True),  # \\ a literal backslash
    ("a\\\\%", "ax", False),
    ("%\\%", "50%", True),
    ("%\\%", "50", False),
    ("a[%", "a[b", True),  # [ digests to a backslash: escaped in the digest
    ("a[%", "a%", False),
    ("a[_", "a[", False),
    ("a[_", "a[x", True),
    ("\\a\\b", "ab", True),  # an escaped ordinary character is itself
    ("x\\", "x\\", True),  # a trailing backslash is itself
    ("三\\%", "三%", True),
    ("三\\%", "三x", False),
    ("%\\\\\\%", "a\\%", True),
    ("%\\\\\\%", "a\\x", False),
]


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize(("pattern", "value", "matches"), CASES)
def test_a_prepared_pattern_digest_matches_what_the_pattern_matches(
    mask: str, pattern: str, value: str, matches: bool
) -> None:
    assert _matches(pattern, value) is matches  # (the case itself)
    encrypted = rewrite_encrypted("SELECT 1 FROM t_user WHERE name LIKE ?", RULES[mask], params=[pattern])
    assert encrypted is not None and encrypted.params is not None
    digest = LIKE[mask].encrypt(value)
    assert _matches(encrypted.params[0], digest) is matches


@pytest.mark.parametrize(("pattern", "value", "matches"), CASES)
def test_a_literal_pattern_digest_matches_what_the_pattern_matches(pattern: str, value: str, matches: bool) -> None:
    sql = "'" + pattern.replace("\\", "\\\\").replace("'", "''") + "'"
    encrypted = rewrite_encrypted(f"SELECT 1 FROM t_user WHERE name LIKE {sql}", RULES["full"])
    assert encrypted is not None
    written = re.search(r"LIKE ('.*')$", encrypted.sql)
    assert written is not None
    assert _matches(literal_value(written.group(1), "s"), LIKE["full"].encrypt(value)) is matches


@pytest.mark.parametrize(("sql", "params"), [
    ("SELECT 1 FROM t_user WHERE name LIKE CONCAT('%', 'x\\\\', '%')", None),  # \ escapes the next part's %
    ("SELECT 1 FROM t_user WHERE name LIKE CONCAT(?, '%')", ["x\\"]),
])  # fmt: skip
def test_a_concat_part_whose_backslash_escapes_the_next_part_is_refused(sql: str, params: list[str] | None) -> None:
    with pytest.raises(ServerError) as info:
        rewrite_encrypted(sql, RULES["full"], params=params)
    assert info.value.errno == 1235 and "t_user.name" in str(info.value)
