"""A seeded random generator of writes across nodes for the differential suite (issue 17,
`test_stepwise_writes.py`): UPDATE / DELETE with ORDER BY ... LIMIT, UPDATEs that assign the sharding
column (rows that stay, rows that move), INSERT [IGNORE] ... SELECT between the sharded tables, mixed with
the plain writes around them, on the shipped layout (`t_order`: databases by user_id % 2, tables by
order_id % 2, PRIMARY KEY order_id; `t_order_item` bound to it).

Only deterministic statements are generated: every ORDER BY ends with the table's primary key, a LIMIT
without ORDER BY only where it exceeds the rows that could match, no range on a sharding column (the
shipped INLINE rules refuse those), no primary key assigned. Every statement must get the oracle's answer
(affected rows, errors such as 1062 included) and leave the oracle's rows, each on its own node.
"""

from __future__ import annotations

import random

STATUSES = ("a", "b", "c", "x")


class WriteGenerator:
    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.offset = 1000  # fresh keys for INSERT ... SELECT

    def choice(self, options: tuple[str, ...] | list[str]) -> str:
        return self.rnd.choice(list(options))

    def condition(self, prefix: str = "") -> str:
        r = self.rnd.random()
        if r < 0.2:
            return ""
        p = prefix
        options = [
            f"{p}status IN ('{self.choice(STATUSES)}', '{self.choice(STATUSES)}')",
            f"{p}status > '{self.choice(STATUSES)}'",
            f"{p}order_id IN ({', '.join(str(self.rnd.randint(1, 40)) for _ in range(4))})",
            f"{p}user_id = {self.rnd.randint(1, 8)}",
            f"{p}user_id IN ({self.rnd.randint(1, 8)}, {self.rnd.randint(1, 8)})",
            f"({p}status = '{self.choice(STATUSES)}' OR {p}user_id = {self.rnd.randint(1, 8)})",
            f"{p}status IS NOT NULL AND {p}user_id <> {self.rnd.randint(1, 8)}",
        ]
        return " WHERE " + self.choice(options)

    def order(self, key: str = "order_id") -> str:
        first = self.choice(["status", "user_id", "status DESC", "user_id DESC", ""])
        last = self.choice([key, f"{key} DESC"])
        return f" ORDER BY {first + ', ' if first else ''}{last}"

    def set_status(self) -> str:
        return self.choice([f"status = '{self.choice(STATUSES)}'", "status = CONCAT(status, '!')",
                            "status = LEFT(CONCAT(status, user_id), 20)", "status = status"])

    def statement(self) -> str:
        kind = self.rnd.random()
        n = self.rnd.randint(1, 6)
        if kind < 0.2:
            return f"UPDATE t_order SET {self.set_status()}{self.condition()}{self.order()} LIMIT {n}"
        if kind < 0.32:
            return f"DELETE FROM t_order{self.condition()}{self.order()} LIMIT {n}"
        if kind < 0.38:
            return f"DELETE FROM t_order_item{self.condition()}{self.order('order_item_id')} LIMIT {n}"
        if kind < 0.58:
            value = self.choice([str(self.rnd.randint(1, 8)), "user_id + 1", "user_id", "9 - user_id % 9"])
            extra = self.choice(["", f", {self.set_status()}"])
            limit = self.choice(["", f"{self.order()} LIMIT {n}"])
            return f"UPDATE t_order SET user_id = {value}{extra}{self.condition()}{limit}"
        if kind < 0.68:
            value = self.choice([str(self.rnd.randint(1, 8)), "user_id + 1"])
            return f"UPDATE t_order_item SET user_id = {value}{self.condition()}"
        if kind < 0.88:
            self.offset += 100
            ignore = self.choice(["", " IGNORE"])
            # order_id: duplicates likely, with IGNORE only: a plain INSERT's duplicate on another node is not
            # seen (PRIMARY KEY order_id lacks the database sharding column; the IGNORE / upsert path checks)
            key = self.choice([f"order_item_id + {self.offset}", "order_id"]) if ignore else \
                f"order_item_id + {self.offset}"
            user = self.choice(["user_id", "user_id + 1", "order_id % 7"])
            limit = self.choice(["", f"{self.order('order_item_id')} LIMIT {n}"])
            return (f"INSERT{ignore} INTO t_order (order_id, user_id, status) SELECT {key}, {user}, status "
                    f"FROM t_order_item{self.condition()}{limit}")
        if kind < 0.95:
            self.offset += 100
            return (f"INSERT INTO t_order_item (order_item_id, order_id, user_id, status) SELECT order_id + "
                    f"{self.offset}, order_id, user_id, status FROM t_order{self.condition()}")
        return f"UPDATE t_order SET {self.set_status()}{self.condition()}"
