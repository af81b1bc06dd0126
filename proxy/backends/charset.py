"""A session's character set state as the proxy re-creates it on the backend connections it lends that session:
`charset_for_collation` (the client's character set, the codec its text is read with) and `names` (the argument
of the `SET NAMES` that gives a connection the session's character sets and collation).

The handshake's collation id is kept exact (`latin1_general_ci`, `utf8mb4_bin`), not only its character set:
`SET NAMES latin1` alone gives `latin1_swedish_ci`, which compares differently. A `SET` that changes the
character set variables is read back from the connection it ran on (`read_names`), unless it is the plain
`SET NAMES cs [COLLATE c]` every connector sends (`names_of`), which is read from its text.

A table lookup and a text reading the frontend, the session and federation need; on its own so that naming it
does not pull in the connection code of `backend.py`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from proxy.backends.collations import COLLATIONS, DEFAULT_COLLATION

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection

DEFAULT_CHARSET = "utf8mb4"  # what MariaDB gives a client whose handshake names an unknown collation id


def charset_for_collation(collation_id: int) -> str:
    """The character set a client's handshake collation id belongs to."""
    entry = COLLATIONS.get(collation_id)
    return entry[0] if entry is not None else DEFAULT_CHARSET


def names_for_collation(collation_id: int) -> str:
    """The `SET NAMES` argument that gives a connection what a handshake with this collation id gives."""
    entry = COLLATIONS.get(collation_id)
    if entry is None:
        return DEFAULT_CHARSET
    charset, collation, default = entry
    return charset if default else f"{charset} COLLATE {collation}"


def names(client: str, results: str | None, connection: str, collation: str) -> str:
    """The `SET NAMES` argument (with assignments after it when the three character sets differ) that re-creates
    these four session variables; the bare character set name when they are what `SET NAMES cs` gives."""
    parts = [client]
    if results != client:
        parts.append(f"character_set_results = {results or 'NULL'}")
    if connection != client:
        parts.append(f"character_set_connection = {connection}")
    if collation != DEFAULT_COLLATION.get(connection):
        if len(parts) == 1:
            return f"{client} COLLATE {collation}"
        parts.append(f"collation_connection = {collation}")
    return ", ".join(parts)


_WORD = r"(?:'(\w+)'|`(\w+)`|\"(\w+)\"|(\w+))"
_PLAIN_NAMES = re.compile(rf"^\s*SET\s+NAMES\s+{_WORD}(?:\s+COLLATE\s+{_WORD})?\s*;?\s*$", re.I)
_CHARSET_VARIABLE = re.compile(
    r"\b(?:NAMES|CHARACTER\s+SET|CHARSET|character_set_(?:client|results|connection)|collation_connection)\b", re.I
)
_ITEM = (
    r"(?:NAMES\s+[^,;]+|(?:CHARACTER\s+SET|CHARSET)\s+[^,;]+|(?:@@(?:session|local)\.|(?:SESSION|LOCAL)\s+)?"
    r"(?:character_set_(?:client|results|connection)|collation_connection)\s*:?=\s*[^,;]+)"
)
_ONLY_CHARSET = re.compile(rf"^\s*SET\s+{_ITEM}(?:\s*,\s*{_ITEM})*\s*;?\s*$", re.I)
_KNOWN = {cs for cs, _name, _default in COLLATIONS.values()}


def changes_names(sql: str) -> bool:
    """Does this session SET change a character set variable (NAMES, CHARACTER SET, character_set_client, ...)?"""
    return _CHARSET_VARIABLE.search(sql) is not None


def only_names(sql: str) -> bool:
    """Does it change nothing else (so that the session's `names` alone re-creates what it did)?"""
    return _ONLY_CHARSET.match(sql) is not None


def names_of(sql: str) -> str | None:
    """The `names` a plain `SET NAMES cs [COLLATE c]` leaves, from its text (no round trip: every connector sends
    one when it connects); None for any other statement (`read_names` asks the connection it ran on)."""
    m = _PLAIN_NAMES.match(sql)
    if m is None:
        return None
    charset = next(g for g in m.groups()[:4] if g).lower()
    charset = "utf8mb3" if charset == "utf8" else charset
    if charset not in _KNOWN:
        return None
    collation = next((g for g in m.groups()[4:] if g), None)
    if collation is None:
        return charset
    collation = (
        collation.lower().replace("utf8_", "utf8mb3_", 1)
        if collation.lower().startswith("utf8_")
        else collation.lower()
    )
    return names(charset, charset, charset, collation)


async def read_names(conn: BackendConnection) -> str | None:
    """The `names` of a connection, as its server reports them (after a SET it ran); None if it cannot say."""
    rows = await conn.execute(
        "SELECT @@character_set_client, @@character_set_results, @@character_set_connection, @@collation_connection"
    )
    if not isinstance(rows, list) or not rows:
        return None
    client, results, connection, collation = (None if v is None else bytes(v).decode("ascii") for v in rows[0])
    if client is None or connection is None or collation is None:
        return None
    return names(client, results, connection, collation)


def client_charset(names_argument: str) -> str:
    """The client's character set (the codec of its text) in a `names` argument."""
    return names_argument.split(None, 1)[0].rstrip(",")
