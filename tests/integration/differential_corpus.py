"""Schema, deterministic rows and the SELECT corpus of the differential suite (`test_differential.py`).

Every case is one SELECT run both through the proxy (logical database `sharding_db`, 2 data sources x 2
tables) and directly against `oracle_db` (one unsharded database holding the same rows). How the two
results are compared depends on how much of the order the query fixes:

* ``ORDERED`` (``Q``): the ORDER BY (or MariaDB's implicit GROUP BY order over unique group values) fully
  determines the order: row lists must be equal.
* ``BAG`` (``B``): order not determined: equal as multisets.
* ``SUBSET`` (``S``): LIMIT without a determined order: same row count, and every proxy row is a row of the
  query without its LIMIT (multiset inclusion).
* ``keys=(i, ...)``: additionally the listed output columns must come in the same order (the sort keys
  of an ORDER BY with ties; rows are then compared as multisets).
* ``ci=(i, ...)``: these string columns hold one representative of a ``_ci`` equivalence class (GROUP BY /
  DISTINCT on a case-insensitive column): which spelling a server returns depends on scan order, so they
  are compared folded (case, accents, trailing spaces).
* ``split=((i, sep), ...)``: GROUP_CONCAT without ORDER BY: the parts are compared as a multiset;
  ``length=(i, ...)``: only the length (a GROUP_CONCAT cut at group_concat_max_len).
* ``before=(sql, ...)``: run through the proxy first — same shape, other literals — so a case about the
  plan cache does not depend on which cases ran before it.
* ``R(sql, fragment)``: a documented limit: the proxy must refuse with ER_NOT_SUPPORTED_YET (1235) and a
  message containing `fragment` (never answer wrongly); the oracle must accept the query.

Known proxy bugs stay in the corpus as strict xfails (`KNOWN_BUGS`, reason "<component>: <what is wrong>").
"""

from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

ORDERED = "ordered"
BAG = "bag"
SUBSET = "subset"

# --- schema -------------------------------------------------------------------------------------------

DDL = (
    """CREATE TABLE t_order (
        order_id BIGINT NOT NULL PRIMARY KEY,
        user_id INT NOT NULL,
        status VARCHAR(45) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,
        amount DECIMAL(10,2) NULL,
        price DOUBLE NULL,
        created DATETIME NULL,
        note VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL
    ) ENGINE=InnoDB""",
    """CREATE TABLE t_order_item (
        order_item_id BIGINT NOT NULL PRIMARY KEY,
        order_id BIGINT NOT NULL,
        user_id INT NOT NULL,
        qty INT NOT NULL,
        unit_price DECIMAL(10,2) NULL,
        sku VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL
    ) ENGINE=InnoDB""",
    """CREATE TABLE t_address (
        address_id BIGINT NOT NULL PRIMARY KEY,
        user_id INT NOT NULL,
        address_name VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,
        city VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL
    ) ENGINE=InnoDB""",
)

ORDER_COLUMNS = ("order_id", "user_id", "status", "amount", "price", "created", "note")
ITEM_COLUMNS = ("order_item_id", "order_id", "user_id", "qty", "unit_price", "sku")
ADDRESS_COLUMNS = ("address_id", "user_id", "address_name", "city")

# --- rows ---------------------------------------------------------------------------------------------

N_ORDERS = 3000
N_USERS = 50
STATUSES = (
    "Paid", "paid", "PAID", "pAid ", "paid", "Paid",
    "pending", "Pending", "PENDING",
    "shipped", "Shipped", "SHIPPED",
    "café", "Café", "cafe", "CAFÉ",
    "ñandú", "init", "Init", "",
)
NOTES = ("urgent", "Urgent", "URGENT ", "gift", "Gift wrap", "été", "ÉTÉ", "ete", "", "x", "zz top", "Zürich")
SKUS = ("A-1", "a-1", "B-2", "b-2 ", "C-3", "Ç-3", "D-4")
CITIES = ("Paris", "paris", "PARIS", "Berlin", "Zürich", "zurich", "Oslo", None)


def _amount(rng: random.Random) -> Decimal | None:
    r = rng.random()
    if r < 0.08:
        return None
    if r < 0.13:
        return Decimal("0.00")
    if r < 0.25:
        return Decimal(rng.randint(-50000, -1)) / 100
    if r < 0.40:
        return Decimal(rng.choice((100, 999, 1999, 5000, 12345))) / 100  # ties
    return Decimal(rng.randint(1, 99999)) / 100


def generate_rows(seed: int = 20240501) -> dict[str, list[tuple[Any, ...]]]:
    """The same rows for the proxy and the oracle. DOUBLE prices are multiples of 0.25, so sums of them
    are exact in any order (a sum's last bits must not depend on how rows were split over shards)."""
    rng = random.Random(seed)
    base = datetime(2024, 1, 1)
    orders: list[tuple[Any, ...]] = []
    items: list[tuple[Any, ...]] = []
    for i in range(1, N_ORDERS + 1):
        order_id = i * 10 + rng.randint(0, 9)
        user_id = rng.randint(1, N_USERS)
        status = rng.choice(STATUSES)
        price = None if rng.random() < 0.1 else rng.randint(-20, 4000) * 0.25
        created = None if rng.random() < 0.05 else base + timedelta(hours=rng.randint(0, 2000))
        note = None if rng.random() < 0.3 else rng.choice(NOTES)
        orders.append((order_id, user_id, status, _amount(rng), price, created, note))
        for j in range(rng.randint(0, 3)):
            qty = rng.randint(0, 9) if rng.random() < 0.95 else -rng.randint(1, 3)
            unit_price = None if rng.random() < 0.1 else Decimal(rng.randint(-100, 20000)) / 100
            items.append((order_id * 10 + j, order_id, user_id, qty, unit_price, rng.choice(SKUS)))
    addresses = [
        (a, a, f"addr {rng.choice(('Main', 'main', 'MAIN ', 'Rue', 'Straße'))} {a}", rng.choice(CITIES))
        for a in range(1, 61)
    ]
    return {"t_order": orders, "t_order_item": items, "t_address": addresses}


# --- comparison helpers -----------------------------------------------------------------------------------


def ci_fold(value: Any) -> Any:
    """A stand-in for utf8mb4_general_ci equality: case, accents and trailing spaces ignored (also those of
    each part of a GROUP_CONCAT with SEPARATOR ' / ': which of several equal values DISTINCT keeps is MariaDB's
    choice, 'paid' or 'pAid ')."""
    if not isinstance(value, str):
        return value
    decomposed = unicodedata.normalize("NFD", " / ".join(p.rstrip(" ") for p in value.split(" / ")).rstrip(" "))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


@dataclass(frozen=True)
class Case:
    sql: str
    check: str = ORDERED
    keys: tuple[int, ...] = ()  # ORDERED-by-these-columns check on top of BAG
    ci: tuple[int, ...] = ()  # columns compared ci-folded
    split: tuple[tuple[int, str], ...] = ()  # (column, separator): GROUP_CONCAT without ORDER BY, parts as a bag
    length: tuple[int, ...] = ()  # columns compared by length only (a truncated GROUP_CONCAT)
    before: tuple[str, ...] = ()  # statements run through the proxy first (same shape, other literals)
    refused: str | None = None  # a documented limit: the proxy must refuse with ER 1235 naming this

    @property
    def id(self) -> str:
        text = " ".join(self.sql.split())[:120]
        return f"{text} [after {len(self.before)}]" if self.before else text


def Q(sql: str, *, ci: tuple[int, ...] = (), split: tuple[tuple[int, str], ...] = (),
      length: tuple[int, ...] = (), before: tuple[str, ...] = ()) -> Case:
    return Case(sql, ORDERED, ci=ci, split=split, length=length, before=before)


def B(sql: str, *, keys: tuple[int, ...] = (), ci: tuple[int, ...] = (),
      split: tuple[tuple[int, str], ...] = ()) -> Case:
    return Case(sql, BAG, keys=keys, ci=ci, split=split)


def S(sql: str, *, ci: tuple[int, ...] = ()) -> Case:
    return Case(sql, SUBSET, ci=ci)


def R(sql: str, refused: str) -> Case:
    return Case(sql, ORDERED, refused=refused)


# --- the corpus ---------------------------------------------------------------------------------------------

ROWS = generate_rows()
OID = [r[0] for r in ROWS["t_order"]]  # existing order ids, for point lookups
A, Bo, C, D = OID[17], OID[1234], OID[2001], OID[2999]
OIDS_IN = ", ".join(str(x) for x in (OID[3], OID[4], OID[500], OID[501], OID[1502], 99999999))

# Output columns of `SELECT * FROM t_order`: order_id 0, user_id 1, status 2, amount 3, price 4, created 5,
# note 6.
_CASES: list[Any] = [
    # -- full scans and filters (on and off the sharding keys) ------------------------------------------
    Q("SELECT * FROM t_order ORDER BY order_id"),
    B("SELECT * FROM t_order"),
    B("SELECT * FROM t_order_item"),
    B("SELECT * FROM t_address"),
    Q("SELECT * FROM t_address ORDER BY address_id"),
    Q("SELECT * FROM t_order WHERE user_id = 7 ORDER BY order_id"),
    B("SELECT * FROM t_order WHERE user_id = 7"),
    B("SELECT * FROM t_order WHERE user_id = 8"),
    B(f"SELECT * FROM t_order WHERE order_id = {A}"),
    B(f"SELECT * FROM t_order WHERE order_id = {Bo} AND user_id = {ROWS['t_order'][1234][1]}"),
    B(f"SELECT * FROM t_order WHERE order_id = {Bo} AND user_id = {ROWS['t_order'][1234][1] + 1}"),
    B("SELECT * FROM t_order WHERE order_id = 1"),
    B("SELECT * FROM t_order WHERE user_id IN (1, 2, 3)"),
    Q("SELECT order_id, user_id FROM t_order WHERE user_id IN (2, 4, 6) ORDER BY order_id DESC"),
    B(f"SELECT * FROM t_order WHERE order_id IN ({OIDS_IN})"),
    Q(f"SELECT order_id, amount FROM t_order WHERE order_id IN ({OIDS_IN}) ORDER BY order_id"),
    B("SELECT * FROM t_order WHERE user_id BETWEEN 10 AND 14"),
    B("SELECT * FROM t_order WHERE order_id BETWEEN 5000 AND 5600"),
    Q("SELECT order_id FROM t_order WHERE order_id > 29000 ORDER BY order_id"),
    Q("SELECT order_id, user_id FROM t_order WHERE order_id >= 100 AND order_id < 600 ORDER BY order_id"),
    B("SELECT * FROM t_order WHERE user_id < 5 OR user_id > 47"),
    B("SELECT * FROM t_order WHERE user_id = 3 OR order_id = 1000"),
    B("SELECT * FROM t_order WHERE user_id = 3 OR status = 'shipped'", ci=()),
    B("SELECT * FROM t_order WHERE status = 'paid'"),
    B("SELECT * FROM t_order WHERE status = 'PAID'"),
    B("SELECT * FROM t_order WHERE status = 'paid   '"),
    B("SELECT * FROM t_order WHERE status = 'cafe'"),
    B("SELECT * FROM t_order WHERE status LIKE 'p%'"),
    B("SELECT * FROM t_order WHERE status IN ('PENDING', 'Café')"),
    B("SELECT * FROM t_order WHERE amount IS NULL"),
    B("SELECT * FROM t_order WHERE amount < 0"),
    B("SELECT * FROM t_order WHERE amount = 0"),
    B("SELECT * FROM t_order WHERE amount = '19.99'"),
    B("SELECT * FROM t_order WHERE price BETWEEN 10 AND 20.5"),
    B("SELECT * FROM t_order WHERE created >= '2024-02-01' AND created < '2024-02-03'"),
    B("SELECT * FROM t_order WHERE note IS NOT NULL AND note <> ''"),
    B("SELECT * FROM t_order WHERE user_id = '7'"),
    B("SELECT * FROM t_order WHERE user_id = 7.0"),
    B("SELECT * FROM t_order WHERE user_id = 999"),
    B("SELECT * FROM t_order WHERE NOT (user_id <> 9)"),
    B("SELECT order_id, user_id FROM t_order WHERE (user_id = 11 AND order_id > 15000) OR user_id = 12"),
    # -- ORDER BY: ties, NULLs, collation, expressions, aliases, positions -------------------------------
    Q("SELECT order_id, amount FROM t_order ORDER BY amount, order_id"),
    Q("SELECT order_id, amount FROM t_order ORDER BY amount DESC, order_id"),
    Q("SELECT order_id, price FROM t_order ORDER BY price DESC, order_id DESC"),
    Q("SELECT order_id, created FROM t_order ORDER BY created, order_id"),
    Q("SELECT order_id, created FROM t_order ORDER BY created DESC, order_id"),
    Q("SELECT order_id, note FROM t_order ORDER BY note, order_id"),
    Q("SELECT order_id, note FROM t_order ORDER BY note DESC, order_id"),
    B("SELECT order_id, amount FROM t_order ORDER BY amount", keys=(1,)),
    B("SELECT order_id, amount FROM t_order ORDER BY amount DESC", keys=(1,)),
    B("SELECT order_id, user_id FROM t_order ORDER BY user_id", keys=(1,)),
    B("SELECT order_id, price, created FROM t_order ORDER BY price, created DESC", keys=(1, 2)),
    Q("SELECT order_id, status FROM t_order ORDER BY status, order_id"),
    Q("SELECT order_id, status FROM t_order ORDER BY status DESC, order_id DESC"),
    B("SELECT order_id, status FROM t_order ORDER BY status", keys=(1,), ci=(1,)),
    Q("SELECT order_id, note, status FROM t_order WHERE user_id = 5 ORDER BY note, status, order_id"),
    Q("SELECT order_id, user_id FROM t_order ORDER BY user_id DESC, order_id ASC"),
    Q("SELECT order_id, amount * 2 AS dbl FROM t_order ORDER BY dbl, order_id"),
    Q("SELECT order_id, amount - price AS diff FROM t_order ORDER BY diff DESC, order_id"),
    Q("SELECT order_id, user_id FROM t_order ORDER BY user_id % 7, order_id"),
    Q("SELECT order_id, user_id FROM t_order ORDER BY 2, 1 DESC"),
    Q("SELECT order_id AS id, status AS s FROM t_order ORDER BY id DESC"),
    Q("SELECT * FROM t_order ORDER BY 1"),
    Q("SELECT order_id, user_id FROM t_order ORDER BY amount, order_id"),
    Q("SELECT order_id FROM t_order ORDER BY created DESC, order_id"),
    Q("SELECT * FROM t_order ORDER BY note DESC, order_id"),
    Q("SELECT user_id, order_id FROM t_order WHERE user_id IN (1, 2) ORDER BY price, order_id"),
    Q("SELECT order_id, LOWER(status) AS ls FROM t_order ORDER BY ls, order_id"),
    Q("SELECT order_id, CONCAT(status, '-', user_id) AS tag FROM t_order ORDER BY tag, order_id"),
    Q("SELECT order_id, COALESCE(amount, -1) AS a FROM t_order ORDER BY a, order_id"),
    Q("SELECT order_id, price FROM t_order ORDER BY ISNULL(price), price, order_id"),
    Q("SELECT order_id, user_id * 1.5 AS u FROM t_order ORDER BY u DESC, order_id"),
    Q("SELECT order_id, CAST(user_id AS CHAR) AS u FROM t_order ORDER BY u, order_id"),
    Q("SELECT o.order_id, o.user_id FROM t_order o ORDER BY o.user_id, o.order_id"),
    Q("SELECT t_order.order_id FROM t_order ORDER BY t_order.order_id DESC"),
    # -- aggregates without GROUP BY ----------------------------------------------------------------------
    Q("SELECT COUNT(*) FROM t_order"),
    Q("SELECT COUNT(*) AS n FROM t_order WHERE user_id = 7"),
    Q("SELECT COUNT(amount), COUNT(price), COUNT(created), COUNT(note) FROM t_order"),
    Q("SELECT COUNT(DISTINCT user_id) FROM t_order"),
    Q("SELECT COUNT(DISTINCT status) FROM t_order"),
    Q("SELECT COUNT(DISTINCT amount) FROM t_order"),
    Q("SELECT COUNT(DISTINCT user_id, status) FROM t_order"),
    Q("SELECT SUM(amount), SUM(price), SUM(user_id) FROM t_order"),
    Q("SELECT SUM(DISTINCT amount), SUM(DISTINCT user_id) FROM t_order"),
    Q("SELECT MIN(amount), MAX(amount), MIN(price), MAX(price) FROM t_order"),
    Q("SELECT MIN(created), MAX(created) FROM t_order"),
    Q("SELECT MIN(status), MAX(status) FROM t_order", ci=(0, 1)),
    Q("SELECT MIN(note), MAX(note) FROM t_order", ci=(0, 1)),
    Q("SELECT MIN(order_id), MAX(order_id) FROM t_order"),
    Q("SELECT AVG(amount) FROM t_order"),
    Q("SELECT AVG(price) FROM t_order"),
    Q("SELECT AVG(user_id) FROM t_order"),
    Q("SELECT AVG(DISTINCT user_id) FROM t_order"),
    Q("SELECT BIT_XOR(order_id), BIT_XOR(user_id) FROM t_order"),
    Q("SELECT BIT_OR(user_id), BIT_AND(order_id) FROM t_order"),
    Q("SELECT COUNT(*), SUM(amount), AVG(amount), MIN(amount), MAX(amount) FROM t_order WHERE user_id = 13"),
    Q("SELECT COUNT(*), SUM(amount), AVG(amount), MIN(amount), MAX(amount) FROM t_order WHERE user_id IN (13, 14)"),
    Q("SELECT MAX(price / 3), MIN(price * 1.1) FROM t_order"),
    Q("SELECT SUM(amount * 2), SUM(amount) + 1, COUNT(*) - 1 FROM t_order"),
    Q("SELECT GROUP_CONCAT(DISTINCT user_id ORDER BY user_id) FROM t_order WHERE user_id < 20"),
    Q("SELECT GROUP_CONCAT(order_id ORDER BY order_id SEPARATOR '|') FROM t_order WHERE user_id = 4"),
    Q("SELECT SUM(qty), MIN(qty), MAX(qty), AVG(qty), COUNT(unit_price), AVG(unit_price) FROM t_order_item"),
    # -- aggregates over empty results ----------------------------------------------------------------------
    Q("SELECT COUNT(*) FROM t_order WHERE user_id = 999"),
    Q("SELECT COUNT(*), SUM(amount), AVG(amount), MIN(amount), MAX(price) FROM t_order WHERE amount > 100000"),
    Q("SELECT COUNT(DISTINCT status), SUM(DISTINCT amount), BIT_XOR(order_id) FROM t_order WHERE order_id < 0"),
    Q("SELECT GROUP_CONCAT(status) FROM t_order WHERE user_id = 999"),
    Q("SELECT COUNT(*) FROM t_order WHERE user_id = 998 AND order_id = 5"),
    Q("SELECT user_id, COUNT(*) FROM t_order WHERE amount > 100000 GROUP BY user_id"),
    # -- GROUP BY -----------------------------------------------------------------------------------------------
    Q("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id"),
    Q("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id ORDER BY user_id"),
    Q("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id ORDER BY user_id DESC"),
    Q("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id ORDER BY n DESC, user_id"),
    B("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id ORDER BY n", keys=(1,)),
    Q("SELECT user_id, SUM(amount) AS s FROM t_order GROUP BY user_id ORDER BY s, user_id"),
    Q("SELECT user_id, SUM(amount), AVG(amount), MIN(price), MAX(created) FROM t_order GROUP BY user_id"),
    Q("SELECT user_id, AVG(price), AVG(user_id) FROM t_order GROUP BY user_id"),
    Q("SELECT user_id, COUNT(DISTINCT status) FROM t_order GROUP BY user_id"),
    Q("SELECT user_id, SUM(DISTINCT amount), COUNT(DISTINCT price) FROM t_order GROUP BY user_id"),
    Q("SELECT user_id, BIT_XOR(order_id) FROM t_order GROUP BY user_id"),
    Q("SELECT user_id, GROUP_CONCAT(order_id ORDER BY order_id) FROM t_order GROUP BY user_id"),
    # ORDER BY the merged string: no node's weight is the merged value's (answered by federation)
    Q("SELECT user_id % 5 AS k, GROUP_CONCAT(DISTINCT user_id % 7 ORDER BY user_id % 7 DESC) AS g FROM t_order "
      "GROUP BY k ORDER BY g DESC, k"),
    Q("SELECT user_id % 3 AS k, GROUP_CONCAT(order_id ORDER BY order_id) AS g FROM t_order WHERE user_id < 9 "
      "GROUP BY k ORDER BY 2, 1"),
    Q("SELECT user_id, GROUP_CONCAT(DISTINCT status ORDER BY status SEPARATOR ' / ') FROM t_order "
      "WHERE user_id < 6 GROUP BY user_id", ci=(1,)),
    Q("SELECT user_id, GROUP_CONCAT(DISTINCT amount ORDER BY amount SEPARATOR ' / ') FROM t_order "
      "WHERE user_id < 6 GROUP BY user_id"),
    Q("SELECT status, COUNT(*) FROM t_order GROUP BY status", ci=(0,)),
    Q("SELECT status, COUNT(*) FROM t_order GROUP BY status ORDER BY status DESC", ci=(0,)),
    Q("SELECT status, COUNT(*) AS n FROM t_order GROUP BY status ORDER BY n DESC, status", ci=(0,)),
    Q("SELECT note, COUNT(*) FROM t_order GROUP BY note", ci=(0,)),
    Q("SELECT amount, COUNT(*) FROM t_order GROUP BY amount"),
    Q("SELECT price, COUNT(*) FROM t_order WHERE price < 50 GROUP BY price"),
    Q("SELECT DATE(created) AS d, COUNT(*) FROM t_order GROUP BY d"),
    Q("SELECT DATE(created) AS d, SUM(amount) FROM t_order GROUP BY DATE(created) ORDER BY d DESC"),
    Q("SELECT user_id % 5 AS m, COUNT(*) FROM t_order GROUP BY m"),
    Q("SELECT user_id, status, COUNT(*) FROM t_order GROUP BY user_id, status", ci=(1,)),
    Q("SELECT user_id, status, COUNT(*) FROM t_order GROUP BY user_id, status ORDER BY user_id DESC, status",
      ci=(1,)),
    Q("SELECT status, user_id, SUM(price) FROM t_order WHERE user_id < 10 GROUP BY status, user_id", ci=(0,)),
    Q("SELECT COUNT(*) FROM t_order GROUP BY user_id ORDER BY user_id"),
    Q("SELECT COUNT(*), user_id FROM t_order GROUP BY user_id ORDER BY COUNT(*), user_id"),
    Q("SELECT user_id FROM t_order GROUP BY user_id ORDER BY SUM(amount) DESC, user_id"),
    Q("SELECT user_id, MAX(amount) - MIN(amount) AS spread FROM t_order GROUP BY user_id ORDER BY spread, user_id"),
    Q("SELECT user_id, COUNT(*) FROM t_order WHERE user_id = 7 GROUP BY user_id"),
    Q("SELECT user_id % 3 AS m, order_id % 2 AS p, COUNT(*), SUM(amount) FROM t_order GROUP BY m, p WITH ROLLUP"),
    Q("SELECT user_id, COUNT(*) + 1, AVG(DISTINCT amount) FROM t_order GROUP BY user_id WITH ROLLUP LIMIT 3, 60"),
    Q("SELECT user_id, COUNT(*) FROM t_order WHERE user_id IN (7, 8) GROUP BY user_id"),
    Q("SELECT order_id % 2 AS p, COUNT(*), SUM(amount) FROM t_order GROUP BY p"),
    Q("SELECT sku, SUM(qty), COUNT(*) FROM t_order_item GROUP BY sku", ci=(0,)),
    Q("SELECT user_id, AVG(qty) FROM t_order_item GROUP BY user_id ORDER BY AVG(qty) DESC, user_id"),
    # -- HAVING -------------------------------------------------------------------------------------------------
    Q("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id HAVING n > 60"),
    Q("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING COUNT(*) > 60"),
    Q("SELECT user_id, SUM(amount) AS s FROM t_order GROUP BY user_id HAVING s > 15000 ORDER BY s DESC"),
    Q("SELECT user_id FROM t_order GROUP BY user_id HAVING SUM(amount) < 12000"),
    Q("SELECT user_id, AVG(price) AS ap FROM t_order GROUP BY user_id HAVING ap BETWEEN 480 AND 520"),
    Q("SELECT status, COUNT(*) FROM t_order GROUP BY status HAVING COUNT(*) >= 300", ci=(0,)),
    Q("SELECT user_id, MAX(amount) AS mx FROM t_order GROUP BY user_id HAVING mx > 990 AND COUNT(*) > 55"),
    Q("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING user_id < 5"),
    # -- DISTINCT ---------------------------------------------------------------------------------------------------
    Q("SELECT DISTINCT user_id FROM t_order ORDER BY user_id"),
    B("SELECT DISTINCT user_id FROM t_order"),
    B("SELECT DISTINCT status FROM t_order", ci=(0,)),
    Q("SELECT DISTINCT status FROM t_order ORDER BY status", ci=(0,)),
    B("SELECT DISTINCT user_id, status FROM t_order", ci=(1,)),
    Q("SELECT DISTINCT user_id, status FROM t_order ORDER BY user_id, status", ci=(1,)),
    B("SELECT DISTINCT amount FROM t_order"),
    Q("SELECT DISTINCT amount FROM t_order ORDER BY amount DESC"),
    B("SELECT DISTINCT note FROM t_order", ci=(0,)),
    B("SELECT DISTINCT user_id % 3 AS m FROM t_order"),
    Q("SELECT DISTINCT DATE(created) AS d FROM t_order ORDER BY d"),
    Q("SELECT DISTINCT user_id FROM t_order WHERE user_id IN (3, 4, 5) ORDER BY user_id DESC"),
    Q("SELECT DISTINCT user_id FROM t_order ORDER BY user_id LIMIT 5"),
    Q("SELECT DISTINCT user_id FROM t_order ORDER BY user_id LIMIT 5, 10"),
    # -- LIMIT / OFFSET -----------------------------------------------------------------------------------------
    Q("SELECT * FROM t_order ORDER BY order_id LIMIT 10"),
    Q("SELECT * FROM t_order ORDER BY order_id DESC LIMIT 10"),
    Q("SELECT * FROM t_order ORDER BY order_id LIMIT 5, 10"),
    Q("SELECT * FROM t_order ORDER BY order_id LIMIT 10 OFFSET 2500"),
    Q("SELECT order_id FROM t_order ORDER BY order_id LIMIT 2990, 100"),
    Q("SELECT order_id FROM t_order ORDER BY order_id LIMIT 5000, 10"),
    Q("SELECT order_id FROM t_order ORDER BY order_id LIMIT 0"),
    Q("SELECT order_id, amount FROM t_order ORDER BY amount DESC, order_id LIMIT 7"),
    Q("SELECT order_id, amount FROM t_order ORDER BY amount, order_id LIMIT 20, 20"),
    Q("SELECT order_id, created FROM t_order ORDER BY created, order_id LIMIT 30"),
    Q("SELECT order_id, status FROM t_order ORDER BY status, order_id LIMIT 100, 50"),
    Q("SELECT order_id, user_id FROM t_order WHERE user_id = 9 ORDER BY order_id LIMIT 3, 4"),
    Q("SELECT order_id, user_id FROM t_order WHERE user_id IN (9, 10) ORDER BY order_id LIMIT 3, 4"),
    Q("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id ORDER BY user_id LIMIT 10, 5"),
    Q("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id ORDER BY n DESC, user_id LIMIT 3"),
    Q("SELECT user_id, SUM(amount) FROM t_order GROUP BY user_id LIMIT 4"),
    Q("SELECT user_id, SUM(amount) FROM t_order GROUP BY user_id LIMIT 45, 10"),
    S("SELECT * FROM t_order LIMIT 10"),
    S("SELECT * FROM t_order LIMIT 100, 10"),
    S("SELECT * FROM t_order LIMIT 2995, 10"),
    S("SELECT order_id, user_id FROM t_order WHERE user_id = 3 LIMIT 5"),
    S("SELECT order_id FROM t_order WHERE amount < 0 LIMIT 20"),
    S("SELECT * FROM t_order_item LIMIT 50"),
    S("SELECT DISTINCT user_id FROM t_order LIMIT 5"),
    Q("SELECT COUNT(*) FROM t_order LIMIT 1"),
    Q("SELECT COUNT(*) FROM t_order LIMIT 1, 1"),
    # -- SELECT * / columns not in the select list / aliases ----------------------------------------------------
    Q("SELECT * FROM t_order ORDER BY amount DESC, order_id"),
    Q("SELECT order_id FROM t_order ORDER BY user_id, order_id"),
    Q("SELECT order_id FROM t_order ORDER BY price DESC, created, order_id LIMIT 25"),
    Q("SELECT status FROM t_order ORDER BY order_id"),
    Q("SELECT order_id AS `Order Id`, user_id AS uid, amount AS `sum` FROM t_order ORDER BY `Order Id`"),
    Q("SELECT o.* FROM t_order o WHERE o.user_id = 21 ORDER BY o.order_id"),
    Q("SELECT order_id, 1 AS one, 'x' AS s, NULL AS n FROM t_order ORDER BY order_id"),
    Q("SELECT order_id, amount + 0 FROM t_order ORDER BY order_id"),
    B("SELECT user_id AS u FROM t_order WHERE user_id = 5 OR user_id = 6"),
    # -- binding joins --------------------------------------------------------------------------------------------
    B("SELECT o.order_id, i.order_item_id, i.qty FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id"),
    Q("SELECT o.order_id, i.order_item_id FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
      "ORDER BY i.order_item_id"),
    Q("SELECT o.order_id, i.order_item_id, i.sku FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
      "WHERE o.user_id = 12 ORDER BY i.order_item_id"),
    B(f"SELECT * FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.order_id = {C}"),
    B("SELECT * FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.user_id IN (1, 2)"),
    Q("SELECT o.user_id, COUNT(*), SUM(i.qty) FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
      "GROUP BY o.user_id"),
    Q("SELECT o.user_id, SUM(i.qty * i.unit_price) AS total FROM t_order o "
      "JOIN t_order_item i ON o.order_id = i.order_id GROUP BY o.user_id ORDER BY total DESC, o.user_id"),
    Q("SELECT o.status, COUNT(i.order_item_id) FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
      "GROUP BY o.status ORDER BY o.status", ci=(0,)),
    Q("SELECT COUNT(*), SUM(i.qty), AVG(i.unit_price) FROM t_order o "
      "JOIN t_order_item i ON o.order_id = i.order_id"),
    Q("SELECT o.order_id, COUNT(*) AS n FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
      "GROUP BY o.order_id ORDER BY n DESC, o.order_id LIMIT 10"),
    Q("SELECT o.order_id, i.qty FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
      "AND o.user_id = i.user_id WHERE i.qty > 7 ORDER BY o.order_id, i.qty, i.order_item_id"),
    Q("SELECT o.order_id, i.order_item_id FROM t_order o LEFT JOIN t_order_item i ON o.order_id = i.order_id "
      "WHERE o.user_id = 30 ORDER BY o.order_id, i.order_item_id"),
    Q("SELECT o.order_id FROM t_order o LEFT JOIN t_order_item i ON o.order_id = i.order_id "
      "WHERE i.order_item_id IS NULL ORDER BY o.order_id"),
    Q("SELECT i.order_item_id, o.amount FROM t_order_item i JOIN t_order o ON i.order_id = o.order_id "
      "ORDER BY o.amount DESC, i.order_item_id LIMIT 15"),
    Q("SELECT DISTINCT o.user_id FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
      "WHERE i.qty = 0 ORDER BY o.user_id"),
    # -- broadcast joins ------------------------------------------------------------------------------------------
    B("SELECT o.order_id, a.address_name FROM t_order o JOIN t_address a ON o.user_id = a.user_id"),
    Q("SELECT o.order_id, a.city FROM t_order o JOIN t_address a ON o.user_id = a.address_id "
      "WHERE o.user_id = 17 ORDER BY o.order_id"),
    Q("SELECT a.city, COUNT(*) FROM t_order o JOIN t_address a ON o.user_id = a.user_id GROUP BY a.city",
      ci=(0,)),
    Q("SELECT a.address_id, COUNT(o.order_id) FROM t_address a LEFT JOIN t_order o ON o.user_id = a.user_id "
      "GROUP BY a.address_id ORDER BY a.address_id"),
    Q("SELECT o.order_id, a.address_name FROM t_order o JOIN t_address a ON o.user_id = a.user_id "
      "ORDER BY a.address_name, o.order_id LIMIT 40"),
    Q("SELECT COUNT(*) FROM t_address"),
    Q("SELECT city, COUNT(*) FROM t_address GROUP BY city", ci=(0,)),
    # -- numbers vs strings ----------------------------------------------------------------------------------------
    Q("SELECT order_id, CAST(amount AS CHAR) AS a FROM t_order ORDER BY a, order_id"),
    Q("SELECT CAST(user_id AS CHAR) AS u, COUNT(*) FROM t_order GROUP BY u"),
    Q("SELECT MAX(CAST(user_id AS CHAR)), MIN(CAST(order_id AS CHAR)) FROM t_order"),
    Q("SELECT SUM(CAST(user_id AS CHAR)) FROM t_order"),
    Q("SELECT order_id, price + 0.5 AS p FROM t_order ORDER BY p, order_id"),
    Q("SELECT order_id, user_id / 3 AS q FROM t_order ORDER BY q DESC, order_id LIMIT 30"),
    Q("SELECT user_id, SUM(user_id / 3) FROM t_order GROUP BY user_id"),
    Q("SELECT user_id, SUM(price) / COUNT(*) FROM t_order GROUP BY user_id ORDER BY user_id"),
]


_CASES += [
    # -- GROUP_CONCAT without ORDER BY (parts compared as a bag), truncation at group_concat_max_len ------
    Q("SELECT GROUP_CONCAT(order_id SEPARATOR '|') FROM t_order WHERE user_id = 4", split=((0, "|"),)),
    Q("SELECT GROUP_CONCAT(order_id SEPARATOR '#') FROM t_order WHERE user_id IN (5, 6)", split=((0, "#"),),
      before=("SELECT GROUP_CONCAT(order_id SEPARATOR '|') FROM t_order WHERE user_id IN (5, 6)",)),
    Q("SELECT user_id, GROUP_CONCAT(status) FROM t_order WHERE user_id < 10 GROUP BY user_id", split=((1, ","),)),
    Q("SELECT user_id, GROUP_CONCAT(amount SEPARATOR '; ') FROM t_order GROUP BY user_id", split=((1, "; "),)),
    Q("SELECT GROUP_CONCAT(order_id) FROM t_order", length=(0,)),
    # -- the plan cache must not keep one statement's literals for the next of the same shape -------------
    Q("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id HAVING n > 70",
      before=("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id HAVING n > 1000",)),
    Q("SELECT user_id FROM t_order GROUP BY user_id HAVING SUM(amount) < 0",
      before=("SELECT user_id FROM t_order GROUP BY user_id HAVING SUM(amount) < 12000",)),
    Q("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING user_id < 2",
      before=("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING user_id < 5",)),
    Q("SELECT order_id, user_id FROM t_order ORDER BY 2, 1 LIMIT 20",
      before=("SELECT order_id, user_id FROM t_order ORDER BY 1, 2 LIMIT 20",)),
    Q("SELECT order_id, amount FROM t_order ORDER BY amount DESC, order_id LIMIT 3, 9",
      before=("SELECT order_id, amount FROM t_order ORDER BY amount DESC, order_id LIMIT 30, 2",)),
    Q("SELECT user_id % 7 AS m, COUNT(*) FROM t_order GROUP BY m",
      before=("SELECT user_id % 3 AS m, COUNT(*) FROM t_order GROUP BY m",)),
    Q("SELECT order_id, 'b' AS tag FROM t_order ORDER BY order_id LIMIT 5",
      before=("SELECT order_id, 'a' AS tag FROM t_order ORDER BY order_id LIMIT 5",)),
    # -- GROUP BY / HAVING with LIMIT -------------------------------------------------------------------------------
    Q("SELECT user_id FROM t_order GROUP BY user_id ORDER BY SUM(amount) DESC, user_id LIMIT 5"),
    Q("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id ORDER BY n, user_id LIMIT 2, 3"),
    Q("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id ORDER BY user_id DESC LIMIT 5"),
    Q("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id HAVING n > 60 ORDER BY user_id LIMIT 3"),
    Q("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id HAVING n > 60 LIMIT 2"),
    Q("SELECT status, COUNT(*) FROM t_order GROUP BY status LIMIT 3", ci=(0,)),
    Q("SELECT DISTINCT status FROM t_order ORDER BY status LIMIT 3", ci=(0,)),
    B("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id ORDER BY NULL"),
    # -- collations in ORDER BY ---------------------------------------------------------------------------------
    Q("SELECT order_id, status FROM t_order ORDER BY status COLLATE utf8mb4_bin, order_id"),
    Q("SELECT order_id, note FROM t_order ORDER BY BINARY note DESC, order_id"),
    Q("SELECT order_id, status FROM t_order WHERE status = 'PAID' ORDER BY status, order_id"),
    # -- more aggregates, empty inputs -------------------------------------------------------------------------------
    Q("SELECT BIT_AND(order_id), BIT_OR(order_id), BIT_XOR(order_id) FROM t_order WHERE user_id = 999"),
    Q("SELECT MIN(status), MAX(created), AVG(price) FROM t_order WHERE order_id < 0"),
    Q("SELECT SUM(qty), COUNT(*) FROM t_order_item WHERE qty < 0"),
    Q("SELECT SUM(DISTINCT price) FROM t_order"),
    Q("SELECT COUNT(DISTINCT note) FROM t_order"),
    Q("SELECT COUNT(1), COUNT(0), COUNT(NULL) FROM t_order"),
    Q("SELECT AVG(amount), AVG(price) FROM t_order WHERE user_id IN (1, 2)"),
    Q("SELECT COUNT(*) AS c, user_id AS u FROM t_order GROUP BY u ORDER BY c DESC, u"),
    Q("SELECT COUNT(*) FROM t_order WHERE order_id BETWEEN 5000 AND 5600 AND user_id = 3"),
    Q("SELECT MAX(amount) FROM t_order WHERE user_id = 7 AND order_id IN (" + OIDS_IN + ")"),
    Q("SELECT * FROM t_order ORDER BY created DESC, order_id LIMIT 10"),
    Q("SELECT order_id FROM t_order WHERE status = 'paid' ORDER BY order_id LIMIT 5"),
    # -- bound tables joined without the table sharding key (order_id) ---------------------------------------
    Q("SELECT COUNT(*) FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id WHERE o.user_id = 3"),
    Q("SELECT o.order_id, i.order_item_id FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id "
      "WHERE o.user_id = 3 ORDER BY o.order_id, i.order_item_id"),
    Q("SELECT o.user_id, COUNT(*) FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id "
      "WHERE o.user_id IN (4, 5) GROUP BY o.user_id"),
    Q("SELECT COUNT(*) FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id AND o.user_id = i.user_id"),
    Q("SELECT COUNT(*) FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE i.user_id = 3"),
    # -- subqueries on broadcast / bound tables -------------------------------------------------------------
    Q("SELECT order_id FROM t_order WHERE user_id IN (SELECT user_id FROM t_address WHERE city = 'paris') "
      "ORDER BY order_id"),
    Q("SELECT COUNT(*) FROM (SELECT user_id, COUNT(*) AS n FROM t_order WHERE user_id = 9 GROUP BY user_id) x"),
    Q(f"SELECT COUNT(*), MAX(a) FROM (SELECT amount AS a FROM t_order WHERE user_id = {ROWS['t_order'][1234][1]} "
      f"AND order_id = {Bo}) x"),
    # -- broadcast table alone ------------------------------------------------------------------------------
    Q("SELECT city, COUNT(*) AS n FROM t_address GROUP BY city ORDER BY n DESC, city LIMIT 2", ci=(0,)),
    Q("SELECT a.city, COUNT(*) AS n FROM t_order o JOIN t_address a ON o.user_id = a.user_id "
      "GROUP BY a.city ORDER BY n DESC LIMIT 2", ci=(0,)),
]


def xfail(case: Case, reason: str) -> Any:
    """A known proxy bug: kept in the corpus, expected to fail until the component is fixed."""
    return pytest.param(case, id=case.id, marks=pytest.mark.xfail(strict=True, reason=reason))


# Known bugs, keyed by the case's SQL: "<component>: <what is wrong>".
KNOWN_BUGS: dict[str, str] = {
}

CASES = [
    xfail(c, KNOWN_BUGS[c.sql]) if c.sql in KNOWN_BUGS else pytest.param(c, id=c.id) for c in _CASES
]
