"""A seeded random generator of statements over two encrypted tables, for `test_encrypt_generated.py`.

The logical tables (what the application sees, and what the plain oracle MariaDB holds):

* ``t_user (user_id, name, pwd, status, score)``: ``name`` encrypted with an AES cipher, an MD5 assisted query column
  and a CHAR_DIGEST_LIKE like query column; ``pwd`` with an AES cipher alone (= and IN on the cipher itself, LIKE
  refused);
* ``t_acct (acct_id, user_id, owner, memo, amount)``: ``owner`` encrypted exactly as ``name`` (so the two compare in
  joins and ``IN (SELECT ...)``).

Each statement is made of text and values (`Val`): as text the values are written as SQL literals (in one of several
styles: quotes doubled or escaped, double quotes, control characters as escapes, ``\\%`` kept as written, or all
raw under NO_BACKSLASH_ESCAPES), as a prepared statement each is a ``?`` with the value as its parameter (sometimes
sent as bytes), so one statement is run both ways; `Generator.variant` draws other values for the same text.

Only statements whose answer over ciphertext must equal the plaintext's are generated as answerable (``read`` /
``write``); the differences that are by design (docs/encrypt.md) are kept out:

* the oracle's encrypted columns are ``utf8mb4_nopad_bin`` and the LIKE query columns binary: equality over AES is
  exact and binary (case, trailing spaces), LIKE over digests case-sensitive;
* the LIKE encryptor's mask keeps every character of the alphabet apart (the default mask folds some characters
  together: a pattern then finds more rows) and its dictionary holds every non-Latin-1 character generated;
* a value compared with an encrypted column is always a string (``= 1000`` compares numbers on the plain server);
  the sessions are utf8mb4 (values are encrypted as UTF-8 text);
* a GROUP BY of an encrypted column always has an ORDER BY (the proxy refuses it without: MariaDB would return the
  groups in plaintext order);
* a ``LIKE CONCAT(...)`` part never ends with a backslash that escapes the next part (refused: parts are digested
  one by one);
* ``NOT IN (SELECT ...)`` only for a name that is not NULL (MariaDB's own inconsistency, see `r_subquery`).

What ShardingSphere refuses over ciphertext too (ORDER BY an encrypted column, its alias or position, ranges and
BETWEEN, functions, aggregates and expressions of it, LIKE on a column without a like query column) is generated
as ``refused``, with what the refusal must name.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: every character values are made of: ASCII letters and digits, a space, quotes, a backslash, the LIKE wildcards,
#: control characters, Latin-1 letters and characters of the LIKE encryptor's dictionary (`DICT`). Not `$` and `^`:
#: with the mask below they would digest to `%` and `_` (kept as themselves, so colliding with `#` and `]`)
ALPHABET = "abcxyzABCXYZ019 '\"\\%_-.#[]\t\n\x00éüß张三丰€Ω"
DICT = "张三丰€Ω"
#: the values rows mostly take (so that conditions find rows)
POOL = (
    "alice", "Alice", "bob", "o'brien", "back\\slash", "张三丰", "张三", "café", "€uro", "", " ", "a b", "50%_off",
    "x_y", "Ωmega", "zeta ", "ß", 'say "hi"', "a\\%b", "[tag]", "tab\there", "two\nlines", "a\\_b\\\\",
)  # fmt: skip
STATUSES = ("a", "b", "c", None)

ENCRYPTED = {"t_user": ("name", "pwd"), "t_acct": ("owner",)}
LIKE_COLUMNS = frozenset({"name", "owner"})


@dataclass(frozen=True)
class Val:
    """A value: a literal in the text, a parameter when prepared. ``kind`` says how a variant of the statement
    draws another value for it (`Generator.redraw`), ``style`` how the text writes it (`literal`), ``raw``: sent
    as bytes when prepared."""

    value: str | int | None
    kind: str = ""
    style: str = ""
    raw: bool = False


#: MariaDB's escape sequences in a string literal (read outside LIKE as the character; `\%` and `\_` stay two)
_ESCAPED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x00": "\\0", "\x1a": "\\Z", "\b": "\\b"}


def literal(value: str | int | None, style: str = "", raw_backslashes: bool = False) -> str:
    """The SQL literal MariaDB reads as ``value``: ``style`` "" quotes with '' and doubles backslashes, "bs"
    writes a quote as \\' and control characters as escapes, "dq" uses double quotes, "keep" writes a backslash
    before % or _ alone (MariaDB keeps both characters, as for LIKE). ``raw_backslashes``: the session's sql_mode
    has NO_BACKSLASH_ESCAPES (a backslash is itself, a quote only doubled)."""
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    quote = '"' if style == "dq" else "'"
    if raw_backslashes:
        return quote + value.replace(quote, quote + quote) + quote
    out = []
    for i, ch in enumerate(value):
        if ch == "\\":
            nxt = value[i + 1] if i + 1 < len(value) else ""
            out.append("\\" if style == "keep" and nxt in ("%", "_") else "\\\\")
        elif ch == quote:
            out.append("\\" + quote if style == "bs" else quote + quote)
        elif ch == "\x00" or (style == "bs" and ch in _ESCAPED):
            out.append(_ESCAPED[ch])
        else:
            out.append(ch)
    return quote + "".join(out) + quote


Part = str | Val


@dataclass
class Stmt:
    parts: list[Part]
    kind: str  # read | write | refused
    ordered: bool = False  # the rows come in an order the statement determines
    refused: str = ""  # for `refused`: the column (table.column) the refusal names
    note: str = ""  # what the generator meant (for the failure message)
    same_as: Stmt | None = None  # a variant of this statement (the same text but its values): one prepared statement

    def text(self, raw_backslashes: bool = False) -> str:
        return "".join(p if isinstance(p, str) else literal(p.value, p.style, raw_backslashes) for p in self.parts)

    def prepared(self) -> tuple[str, tuple[Any, ...]]:
        sql = "".join(p if isinstance(p, str) else "?" for p in self.parts)
        vals = [p for p in self.parts if isinstance(p, Val)]
        values = tuple(v.value.encode() if v.raw and isinstance(v.value, str) else v.value for v in vals)
        return sql, values

    def __str__(self) -> str:
        sql, params = self.prepared()
        return f"{self.text()}\n   prepared: {sql} {params!r}"


def _join(chunks: Sequence[Sequence[Part]], sep: str) -> list[Part]:
    out: list[Part] = []
    for i, chunk in enumerate(chunks):
        if i:
            out.append(sep)
        out.extend(chunk)
    return out


@dataclass
class State:
    """What the generator knows of the rows (refreshed from the oracle after each write)."""

    user_ids: list[int] = field(default_factory=list)
    acct_ids: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # encrypted values the rows hold now


READS = ("simple", "simple", "simple", "point", "point", "distinct", "group", "join", "subquery", "union", "limit",
         "star", "alias", "derived", "scalar")  # fmt: skip
WRITES = ("insert", "insert", "insert_set", "insert_nocols", "update", "update", "update_plain", "delete", "upsert",
          "upsert", "replace", "insert_acct", "update_acct", "update_join", "delete_join", "update_limit",
          "insert_select")  # fmt: skip


class Generator:
    def __init__(self, seed: int, sharded: bool) -> None:
        self.rng = random.Random(seed)
        self.sharded = sharded
        self.state = State()
        self.next_id = 1000

    # -- values --

    def string(self) -> str:
        r = self.rng.random()
        if r < 0.55:
            return self.rng.choice(POOL)
        if r < 0.8 and self.state.names:
            return self.rng.choice(self.state.names)
        return "".join(self.rng.choice(ALPHABET) for _ in range(self.rng.randint(0, 8)))

    def style(self) -> str:
        return self.rng.choice(("", "", "", "bs", "dq", "keep"))

    def sval(self, kind: str = "str", null: float = 0.0) -> Val:
        """A string value of ``kind`` (str: for an encrypted column, pat: a LIKE pattern, plain: a status)."""
        if self.rng.random() < null:
            return Val(None, kind)
        value = self.draw(kind)
        return Val(value, kind, self.style(), self.rng.random() < 0.1)

    def ival(self, kind: str = "int") -> Val:
        return Val(self.draw(kind), kind)

    def draw(self, kind: str) -> Any:
        rng = self.rng
        if kind == "str":
            return self.string()
        if kind == "pat":
            return self.pattern()
        if kind == "plain":
            return rng.choice(STATUSES[:3])
        if kind == "uid":
            return self.user_id()
        if kind == "acct":
            return rng.choice(self.state.acct_ids) if self.state.acct_ids and rng.random() < 0.9 else rng.randint(1, 60)
        if kind == "limit":
            return rng.randint(0, 5)
        return rng.randint(0, 9)

    def variant(self, stmt: Stmt) -> Stmt:
        """The statement with other values of the same kinds (a NULL stays NULL): the same text shape, so the proxy
        may answer it from what it kept of the first (a rewrite recipe, a prepared statement)."""
        parts: list[Part] = [
            p if isinstance(p, str) or p.value is None or not p.kind else Val(self.draw(p.kind), p.kind, p.style, p.raw)
            for p in stmt.parts
        ]
        return Stmt(parts, stmt.kind, stmt.ordered, stmt.refused, stmt.note + " (variant)", stmt.same_as or stmt)

    def pattern(self) -> str:
        """A LIKE pattern, mostly from a value rows hold; the characters it matches literally escaped where they would
        be wildcards (or an escape) otherwise, sometimes every character escaped."""
        rng = self.rng
        base = self.string()
        n = len(base)
        kind = rng.randrange(8)
        if kind == 0 or n == 0:
            pieces = [base, "%"]
        elif kind == 1:
            pieces = [base[: rng.randint(0, n)], "%"]
        elif kind == 2:
            pieces = ["%", base[rng.randint(0, n) :]]
        elif kind == 3:
            i = rng.randint(0, n)
            pieces = ["%", base[i : i + rng.randint(1, 3)], "%"]
        elif kind == 4:
            i = rng.randrange(n)
            pieces = [base[:i], "_", base[i + 1 :]]
        elif kind == 5:
            pieces = [base]
        elif kind == 6:
            return "%"
        else:
            escaped = "".join("\\" + ch if ch in "%_\\" or rng.random() < 0.5 else ch for ch in base)
            return escaped + rng.choice(("", "%"))  # (every character escaped or not: the same literal text)
        # (the literal pieces escaped: their %, _ and backslashes match themselves)
        return "".join(p if p in ("%", "_") else _escape_like(p) for p in pieces)

    def user_id(self, fresh: float = 0.2) -> int:
        if self.state.user_ids and self.rng.random() > fresh:
            return self.rng.choice(self.state.user_ids)
        return self.rng.randint(1, 60)

    # -- conditions --

    def atom(self, table: str, q: str) -> list[Part]:
        """One condition over ``table`` (columns qualified with ``q``, which ends with a dot or is empty)."""
        rng = self.rng
        if table == "t_user":
            enc, plain_str, plain_int, key = rng.choice(("name", "name", "pwd")), "status", "score", "user_id"
        else:
            enc, plain_str, plain_int, key = "owner", "memo", "amount", "acct_id"
        col = q + enc
        kind = rng.randrange(15)
        if kind == 0:
            return [f"{col} = ", self.sval()]
        if kind == 1:
            return [self.sval(), f" = {col}"]
        if kind == 2:
            return [f"{col} {rng.choice(('<>', '!='))} ", self.sval()]
        if kind == 3:
            items = [[self.sval(null=0.1)] for _ in range(rng.randint(1, 4))]
            return [f"{col} {rng.choice(('IN', 'IN', 'NOT IN'))} (", *_join(items, ", "), ")"]
        if kind == 4:
            return [f"{col} IS {rng.choice(('', 'NOT '))}NULL"]
        if kind == 5:
            return [f"{col} <=> ", self.sval(null=0.2)]
        if kind in (6, 7, 14):
            col = q + ("name" if table == "t_user" else "owner")
            if rng.random() < 0.2:
                return [f"{col} LIKE CONCAT('%', ", self.sval("pat"), ", '%')"]
            return [f"{col} {rng.choice(('LIKE', 'LIKE', 'NOT LIKE'))} ", self.sval("pat")]
        if kind == 8:
            return [f"{q}{plain_str} = ", self.sval("plain")]
        if kind == 9:
            return [f"{q}{plain_int} {rng.choice(('>', '<', '>=', '='))} ", self.ival()]
        if kind == 10:
            ids = [[self.ival("uid" if table == "t_user" else "acct")] for _ in range(rng.randint(1, 3))]
            return [f"{q}{key} IN (", *_join(ids, ", "), ")"]
        if kind == 11:
            return [f"{q}{plain_str} IS NULL"]
        if kind == 12:
            return [f"{q}user_id {rng.choice(('=', '<>', '>'))} ", self.ival("uid")]
        return [f"{col} = ", self.sval(), f" AND {q}{plain_str} IS NOT NULL"]

    def cond(self, table: str, q: str, depth: int = 0) -> list[Part]:
        r = self.rng.random()
        if depth >= 2 or r < 0.45:
            return self.atom(table, q)
        if r < 0.9:
            op = self.rng.choice((" AND ", " OR "))
            return ["(", *self.cond(table, q, depth + 1), op, *self.cond(table, q, depth + 1), ")"]
        return ["NOT (", *self.cond(table, q, depth + 1), ")"]

    # -- statements --

    def next(self) -> Stmt:
        r = self.rng.random()
        stmt = self.read() if r < 0.55 else self.write() if r < 0.85 else self.refused()
        r = self.rng.random()
        if r < 0.08:  # (keywords and names in lower case: the same text on both sides)
            stmt.parts = [p.lower() if isinstance(p, str) else p for p in stmt.parts]
        elif r < 0.16:  # (a comment: the fast path leaves the text to the session's coroutine)
            stmt.parts = [self.rng.choice(("/* generated */ ", "-- c\n", "# c\n")), *stmt.parts]
        return stmt

    def read(self) -> Stmt:
        kind = self.rng.choice(READS)
        stmt: Stmt = getattr(self, f"r_{kind}")()
        stmt.note = stmt.note or kind
        return stmt

    def _items(self, q: str) -> list[str]:
        choices = [f"{q}user_id", f"{q}name", f"{q}pwd", f"{q}status", f"{q}score", f"{q}name AS n",
                   f"{q}pwd AS secret", f"{q}score + 1 AS s1", "'k' AS k", f"{q}NAME", f"{q}`pwd`"]  # fmt: skip
        return self.rng.sample(choices, self.rng.randint(1, 4))

    def _where(self, table: str, q: str) -> list[Part]:
        return [" WHERE ", *self.cond(table, q)] if self.rng.random() < 0.85 else []

    def r_simple(self) -> Stmt:
        q = self.rng.choice(("", "u."))
        frm = "t_user u" if q else self.rng.choice(("t_user", "t_user u"))
        ordered = self.rng.random() < 0.3
        tail = f" ORDER BY {q}user_id{self.rng.choice(('', ' DESC'))}" if ordered else ""
        parts: list[Part] = [f"SELECT {', '.join(self._items(q))} FROM {frm}", *self._where("t_user", q), tail]
        return Stmt(parts, "read", ordered=ordered)

    def r_point(self) -> Stmt:
        """One user (one data node when sharded): the fast path's prepared SELECT."""
        extra: list[Part] = [" AND ", *self.atom("t_user", "")] if self.rng.random() < 0.6 else []
        return Stmt([f"SELECT {', '.join(self._items(''))} FROM t_user WHERE user_id = ", self.ival("uid"), *extra],
                    "read")  # fmt: skip

    def r_alias(self) -> Stmt:
        parts: list[Part] = ["SELECT x.user_id AS id, x.name AS nm, x.pwd FROM t_user AS x WHERE ",
                             *self.cond("t_user", "x.")]  # fmt: skip
        return Stmt(parts, "read")

    def r_star(self) -> Stmt:
        table = self.rng.choice(("t_user", "t_acct"))
        return Stmt([f"SELECT * FROM {table}", *self._where(table, "")], "read")

    def r_limit(self) -> Stmt:
        q = self.rng.choice(("", "u."))
        frm = "t_user u" if q else "t_user"
        limit: list[Part] = [" LIMIT ", self.ival("limit")]
        r = self.rng.random()
        if r < 0.2:
            limit = [" LIMIT ", self.ival("limit"), ", ", self.ival("limit")]
        elif r < 0.3:
            limit = [" LIMIT ", self.ival("limit"), " OFFSET ", self.ival("limit")]
        parts: list[Part] = [f"SELECT {', '.join(self._items(q))} FROM {frm}", *self._where("t_user", q),
                             f" ORDER BY {q}user_id{self.rng.choice(('', ' DESC'))}", *limit]  # fmt: skip
        return Stmt(parts, "read", ordered=True)

    def r_distinct(self) -> Stmt:
        items = self.rng.choice(("name", "pwd", "name, status", "status, pwd", "(name)", "name AS n, pwd"))
        return Stmt([f"SELECT DISTINCT {items} FROM t_user", *self._where("t_user", "")], "read")

    def r_group(self) -> Stmt:
        rng = self.rng
        key = rng.choice(("name", "pwd", "name, status", "status", "pwd, name"))
        agg = rng.choice(("COUNT(*)", "COUNT(*) AS c", "SUM(score)", "MIN(user_id)", "COUNT(status)"))
        r = rng.random()
        where = self._where("t_user", "")
        if key == "name" and r < 0.3:
            return Stmt([f"SELECT name AS nm, {agg} FROM t_user", *where,
                         f" GROUP BY {rng.choice(('nm', '1'))} ORDER BY NULL"], "read")  # fmt: skip
        if r < 0.5:
            return Stmt([f"SELECT {key}, COUNT(*) AS c FROM t_user", *where, f" GROUP BY {key} HAVING c > ",
                         self.ival("limit"), " ORDER BY NULL"], "read")  # fmt: skip
        if r < 0.7:  # (ties in the order: compared as a multiset)
            agg = agg.split(" AS ")[0]
            return Stmt([f"SELECT {key}, {agg} AS a FROM t_user", *where, f" GROUP BY {key} ORDER BY a"], "read")
        return Stmt([f"SELECT {key}, {agg} FROM t_user", *where, f" GROUP BY {key} ORDER BY NULL"], "read")

    def r_join(self) -> Stmt:
        rng = self.rng
        on = rng.choice(("a.owner = u.name", "u.name = a.owner", "a.user_id = u.user_id",
                         "a.user_id = u.user_id AND a.owner = u.name"))  # fmt: skip
        how = rng.choice(("JOIN", "JOIN", "LEFT JOIN"))
        items = rng.sample(("u.user_id", "a.acct_id", "u.name", "a.owner", "a.memo", "u.pwd", "a.owner AS o"),
                           rng.randint(2, 4))  # fmt: skip
        if rng.random() < 0.15:
            items = [rng.choice(("*", "u.*, a.owner", "a.*, u.name"))]
        where: list[Part] = []
        r = rng.random()
        if r < 0.4:
            where = [" WHERE ", *self.cond("t_user", "u.")]
        elif r < 0.8:
            where = [" WHERE ", *self.cond("t_acct", "a."), " AND ", *self.cond("t_user", "u.")]
        return Stmt([f"SELECT {', '.join(items)} FROM t_user u {how} t_acct a ON {on}", *where], "read")

    def r_subquery(self) -> Stmt:
        rng = self.rng
        kind = rng.randrange(6)
        head = f"SELECT {', '.join(self._items('u.'))} FROM t_user u WHERE "
        if kind == 0:
            # (NOT IN only for a name that is not NULL: MariaDB 10.11, executing a prepared `NULL NOT IN (SELECT ...)`
            # again, answers as its first execute's subquery did, found rows or not; the proxy's backend statement
            # is executed more often than the oracle's)
            op = rng.choice(("u.name IN", "u.name IS NOT NULL AND u.name NOT IN"))
            inner = [f"{op} (SELECT a.owner FROM t_acct a", *self._where("t_acct", "a."), ")"]
        elif kind == 1:
            inner = ["u.user_id IN (SELECT a.user_id FROM t_acct a WHERE ", *self.cond("t_acct", "a."), ")"]
        elif kind == 2:
            inner = [f"{rng.choice(('', 'NOT '))}EXISTS (SELECT 1 FROM t_acct a WHERE a.user_id = u.user_id AND ",
                     *self.cond("t_acct", "a."), ")"]  # fmt: skip
        elif kind == 3:
            inner = ["EXISTS (SELECT 1 FROM t_acct a WHERE a.user_id = u.user_id AND a.owner = u.name)"]
        else:
            inner = ["u.name = (SELECT a.owner FROM t_acct a WHERE a.acct_id = ", self.ival("acct"), ")"]
        extra: list[Part] = [" AND ", *self.cond("t_user", "u.")] if rng.random() < 0.4 else []
        return Stmt([head, *inner, *extra], "read")

    def r_union(self) -> Stmt:
        op = self.rng.choice((" UNION ", " UNION ALL "))
        parts: list[Part] = ["SELECT user_id AS id, name FROM t_user", *self._where("t_user", ""), op,
                             "SELECT acct_id, owner FROM t_acct", *self._where("t_acct", "")]  # fmt: skip
        return Stmt(parts, "read")

    def r_derived(self) -> Stmt:
        rng = self.rng
        inner = ["(SELECT user_id AS uid, name AS n, pwd, status FROM t_user", *self._where("t_user", ""), ") d"]
        if rng.random() < 0.3:
            inner = ["(SELECT * FROM t_user", *self._where("t_user", ""), ") d"]
            items = rng.choice(("*", "d.user_id, d.name", "d.pwd"))
            outer = rng.choice(([" WHERE d.name = ", self.sval()], [" WHERE d.name LIKE ", self.sval("pat")],
                                [" WHERE d.pwd IN (", self.sval(), ", ", self.sval(), ")"], []))  # fmt: skip
        else:
            items = rng.choice(("d.uid, d.n", "d.n, d.pwd", "*", "d.status, d.n AS nn"))
            outer = rng.choice(([" WHERE d.n = ", self.sval()], [" WHERE d.n LIKE ", self.sval("pat")],
                                [" WHERE d.pwd <> ", self.sval()], [" WHERE d.n IS NULL"], []))  # fmt: skip
        return Stmt([f"SELECT {items} FROM ", *inner, *outer], "read")

    def r_scalar(self) -> Stmt:
        return Stmt(["SELECT u.user_id, (SELECT a.owner FROM t_acct a WHERE a.acct_id = ", self.ival("acct"),
                     ") AS o FROM t_user u", *self._where("t_user", "u.")], "read")  # fmt: skip

    # -- writes --

    def write(self) -> Stmt:
        kind = self.rng.choice(WRITES)
        if self.sharded and kind in ("update_limit", "insert_select"):
            kind = "update"  # (the sharding kernel refuses them over several nodes: not the encryption's)
        stmt: Stmt = getattr(self, f"w_{kind}")()
        stmt.note = stmt.note or kind
        return stmt

    def _fresh_id(self) -> int:
        self.next_id += self.rng.randint(1, 3)
        return self.next_id

    def _row(self, cols: Sequence[str]) -> list[Part]:
        rng = self.rng
        row: list[list[Part]] = []
        for c in cols:
            if c == "user_id":
                v: Val = Val(self._fresh_id() if rng.random() < 0.9 or self.sharded else self.user_id(0))
            elif c in ("name", "pwd"):
                v = self.sval(null=0.1)
            elif c == "status":
                v = Val(rng.choice(STATUSES))
            else:
                v = Val(rng.randint(0, 9))
            row.append([v])
        return ["(", *_join(row, ", "), ")"]

    def w_insert(self) -> Stmt:
        rng = self.rng
        cols = ["user_id", *rng.sample(("name", "pwd", "status", "score"), rng.randint(1, 4))]
        rng.shuffle(cols)
        rows = [self._row(cols) for _ in range(rng.randint(1, 4))]
        ignore = " IGNORE" if rng.random() < 0.1 else ""
        return Stmt([f"INSERT{ignore} INTO t_user ({', '.join(cols)}) VALUES ", *_join(rows, ", ")], "write")

    def w_insert_nocols(self) -> Stmt:
        cols = ("user_id", "name", "pwd", "status", "score")
        rows = [self._row(cols) for _ in range(self.rng.randint(1, 2))]
        return Stmt([f"INSERT INTO t_user {self.rng.choice(('VALUES', 'VALUE'))} ", *_join(rows, ", ")], "write")

    def w_insert_set(self) -> Stmt:
        parts: list[Part] = ["INSERT INTO t_user SET user_id = ", Val(self._fresh_id()), ", name = ",
                             self.sval(null=0.1), ", status = ", Val(self.rng.choice(STATUSES))]  # fmt: skip
        if self.rng.random() < 0.5:
            parts += [", pwd = ", self.sval(null=0.1)]
        return Stmt(parts, "write")

    def _assign(self, q: str = "") -> list[Part]:
        rng = self.rng
        sets = rng.sample(("name", "pwd", "status", "score"), rng.randint(1, 3))
        out: list[list[Part]] = []
        for c in sets:
            if c in ("name", "pwd"):
                out.append([f"{q}{c} = ", self.sval(null=0.1)])
            elif c == "status":
                out.append([f"{q}{c} = ", Val(rng.choice(STATUSES))])
            else:
                out.append([rng.choice((f"{q}score = {q}score + 1", f"{q}score = NULL"))])
        if not any(c in ("name", "pwd") for c in sets):
            out.append([f"{q}{rng.choice(('name', 'pwd'))} = ", self.sval(null=0.1)])
        return _join(out, ", ")

    def w_update(self) -> Stmt:
        return Stmt(["UPDATE t_user SET ", *self._assign(), " WHERE ", *self.cond("t_user", "")], "write")

    def w_update_limit(self) -> Stmt:
        verb = self.rng.choice(("UPDATE t_user SET ", "DELETE FROM t_user"))
        assign = self._assign() if verb.startswith("UPDATE") else []
        return Stmt([verb, *assign, " WHERE ", *self.cond("t_user", ""), " ORDER BY user_id LIMIT ",
                     Val(self.rng.randint(1, 3))], "write")  # fmt: skip

    def w_update_plain(self) -> Stmt:
        return Stmt(["UPDATE t_user SET status = ", Val(self.rng.choice(STATUSES)), " WHERE ",
                     *self.cond("t_user", "")], "write")  # fmt: skip

    def w_update_join(self) -> Stmt:
        return Stmt(["UPDATE t_user u JOIN t_acct a ON a.user_id = u.user_id SET ", *self._assign("u."), " WHERE ",
                     *self.cond("t_acct", "a.")], "write")  # fmt: skip

    def w_delete_join(self) -> Stmt:
        return Stmt(["DELETE u FROM t_user u JOIN t_acct a ON a.user_id = u.user_id WHERE ",
                     *self.cond("t_acct", "a."), " AND ", *self.cond("t_user", "u.")], "write")  # fmt: skip

    def w_delete(self) -> Stmt:
        return Stmt(["DELETE FROM t_user WHERE ", *self.cond("t_user", "")], "write")

    def w_upsert(self) -> Stmt:
        rng = self.rng
        rows = []
        for _ in range(rng.randint(1, 3)):
            rows.append(["(", Val(self.user_id(0.3)), ", ", self.sval(null=0.1), ", ", self.sval(null=0.1), ")"])
        update = rng.choice((["name = VALUES(name)"], ["pwd = ", self.sval(null=0.1)],
                             ["name = VALUES(name), pwd = ", self.sval(), ", status = 'u'"],
                             ["status = 'u'"], ["score = score + 1, pwd = VALUES(pwd)"],
                             ["pwd = VALUES(name)"], ["t_user.pwd = VALUES(pwd), name = ", self.sval(null=0.2)]))
        return Stmt(["INSERT INTO t_user (user_id, name, pwd) VALUES ", *_join(rows, ", "),
                     " ON DUPLICATE KEY UPDATE ", *update], "write")  # fmt: skip

    def w_replace(self) -> Stmt:
        return Stmt(["REPLACE INTO t_user (user_id, name, status) VALUES (", Val(self.user_id(0.3)), ", ",
                     self.sval(null=0.1), ", ", Val(self.rng.choice(STATUSES)), ")"], "write")  # fmt: skip

    def w_insert_acct(self) -> Stmt:
        rng = self.rng
        rows = []
        with_id = self.sharded or rng.random() < 0.7  # (sharded: each shard's AUTO_INCREMENT is its own)
        for _ in range(rng.randint(1, 3)):
            row: list[Part] = ["("]
            if with_id:
                row += [Val(self._fresh_id()), ", "]
            row += [Val(self.user_id(0.1)), ", ", self.sval(null=0.1), ", ", Val(rng.choice(STATUSES)), ", ",
                    Val(rng.randint(0, 9)), ")"]  # fmt: skip
            rows.append(row)
        cols = "acct_id, user_id, owner, memo, amount" if with_id else "user_id, owner, memo, amount"
        return Stmt([f"INSERT INTO t_acct ({cols}) VALUES ", *_join(rows, ", ")], "write")

    def w_insert_select(self) -> Stmt:
        """Copies a column encrypted the same way (pass-through only: the sharding kernel refuses it over shards)."""
        self.next_id += 10_000
        return Stmt(["INSERT INTO t_acct (acct_id, user_id, owner, memo) SELECT user_id + ", Val(self.next_id),
                     ", user_id, name, status FROM t_user", *self._where("t_user", "")], "write")  # fmt: skip

    def w_update_acct(self) -> Stmt:
        return Stmt(["UPDATE t_acct SET owner = ", self.sval(null=0.1), " WHERE ", *self.cond("t_acct", "")],
                    "write")  # fmt: skip

    # -- what ShardingSphere refuses too --

    def refused(self) -> Stmt:
        rng = self.rng
        col = rng.choice(("name", "pwd"))
        kind = rng.randrange(8)
        if kind == 0:
            return Stmt([f"SELECT user_id FROM t_user ORDER BY {col}{rng.choice(('', ' DESC'))}"], "refused",
                        refused=f"t_user.{col}", note="ORDER BY")  # fmt: skip
        if kind == 1:
            op = rng.choice(("<", ">", "<=", ">="))
            return Stmt([f"SELECT user_id FROM t_user WHERE {col} {op} ", self.sval()], "refused",
                        refused=f"t_user.{col}", note="a range")  # fmt: skip
        if kind == 2:
            return Stmt([f"SELECT user_id FROM t_user WHERE {col} BETWEEN ", self.sval(), " AND ", self.sval()],
                        "refused", refused=f"t_user.{col}", note="BETWEEN")  # fmt: skip
        if kind == 3:
            fn = rng.choice(("UPPER({})", "LENGTH({})", "CONCAT({}, 'x')", "SUBSTR({}, 1, 2)"))
            return Stmt([f"SELECT user_id, {fn.format(col)} FROM t_user"], "refused", refused=f"t_user.{col}",
                        note="a function")  # fmt: skip
        if kind == 4:
            return Stmt(["SELECT user_id FROM t_user WHERE pwd LIKE ", self.sval("pat")], "refused",
                        refused="t_user.pwd", note="LIKE without a like query column")  # fmt: skip
        if kind == 5:
            fn = rng.choice(("MAX({})", "SUM({})", "AVG({})"))
            return Stmt([f"SELECT {fn.format(col)} FROM t_user"], "refused", refused=f"t_user.{col}",
                        note="an aggregate")  # fmt: skip
        if kind == 6:
            by = rng.choice(("ORDER BY x", "ORDER BY 2"))
            return Stmt([f"SELECT user_id, {col} AS x FROM t_user {by}"], "refused",
                        refused=f"{by} names an encrypted column",
                        note="ORDER BY its alias or position")  # fmt: skip
        return Stmt([f"SELECT user_id FROM t_user WHERE {col} + 1 = ", Val(2)], "refused", refused=f"t_user.{col}",
                    note="an expression")  # fmt: skip


def _escape_like(text: str) -> str:
    """Text a LIKE pattern matches literally: its %, _ and backslashes escaped."""
    return "".join("\\" + ch if ch in "%_\\" else ch for ch in text)
