"""`authority.privilege`: which logical databases a user may use, as ShardingSphere's privilege providers.

```yaml
authority:
  users:
    - {user: root@%, password: root, admin: true}
    - {user: sharding@%, password: sharding}
    - {user: test@127.0.0.1, password: t}
  privilege:
    type: DATABASE_PERMITTED          # ALL_PERMITTED (the default): every user may use every database
    props:
      user-database-mappings: sharding@%=*, test@127.0.0.1=test_db, test@127.0.0.1=sharding_db
```

As in ShardingSphere 5.5 (`DatabasePermittedPrivilegeProvider`, `Grantee.accept`, `AuthorityChecker`):

* each mapping is `name@host=database`, separated by commas; `*` for the database means every database;
  an empty host (`user@=db`) is `%`;
* the databases of a configured user (the `authority.users` entry the client logged in as) are those of
  every mapping with the same name (case-insensitive) whose host is `%` or the user's own host pattern
  (case-insensitive): `test@%=db` grants `db` to `test@127.0.0.1` and to `test@%`, `test@127.0.0.1=db`
  only to the user configured as `test@127.0.0.1`;
* an `admin: true` user may use every database;
* database names compare case-insensitively, as the proxy looks them up.

What a user may not use is invisible to them (SHOW DATABASES), and naming it (USE, COM_INIT_DB, the
handshake's database, COM_CHANGE_USER, `SHOW ... FROM db`) answers MySQL's ER_DBACCESS_DENIED_ERROR 1044
`Access denied for user 'u'@'host' to database 'db'` (the host is the user's configured host pattern, as
MySQL reports its account's host) — also for a name no logical database has, so that the error does not
tell which databases exist.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from routing.config import refuse_unknown_keys
from routing.errors import ConfigError


class User(Protocol):
    """What a privilege check reads of a configured user (proxy.config.model.UserConfig, which imports this)."""

    user: str
    host: str
    admin: bool

ALL_PERMITTED = "ALL_PERMITTED"
DATABASE_PERMITTED = "DATABASE_PERMITTED"
_ALIASES = {"ALL_PERMITTED": ALL_PERMITTED, "ALL_PRIVILEGES_PERMITTED": ALL_PERMITTED,
            "DATABASE_PERMITTED": DATABASE_PERMITTED, "SCHEMA_PRIVILEGES_PERMITTED": DATABASE_PERMITTED}
MAPPINGS_KEY = "user-database-mappings"
ER_DBACCESS_DENIED_ERROR = 1044


@dataclass(frozen=True)
class Grant:
    user: str  # lower case
    host: str  # lower case; '%' for any
    database: str  # lower case; '*' for every database


@dataclass(frozen=True)
class Privilege:
    type: str = ALL_PERMITTED
    mappings: tuple[Grant, ...] = ()

    def databases(self, user: User | None) -> frozenset[str] | None:
        """The (lower-case) names `user` may use; None: every database."""
        if self.type == ALL_PERMITTED or user is None or user.admin:
            return None
        name, host = user.user.lower(), (user.host or "%").lower()
        found = frozenset(m.database for m in self.mappings if m.user == name and m.host in ("%", host))
        return None if "*" in found else found

    def permits(self, user: User | None, database: str) -> bool:
        allowed = self.databases(user)
        return allowed is None or database.lower() in allowed

    def visible(self, user: User | None, names: Iterable[str]) -> list[str]:
        allowed = self.databases(user)
        return [n for n in names if allowed is None or n.lower() in allowed]


def denied_message(user: User | None, database: str) -> str:
    name = user.user if user is not None else ""
    host = user.host if user is not None else "%"
    return f"Access denied for user '{name}'@'{host}' to database '{database}'"


def parse_privilege(raw: Any, file: str, users: Iterable[User], warn: Callable[[str], None]) -> Privilege:
    """`authority.privilege` of global.yaml; `ConfigError` names the key at fault."""
    key = "authority.privilege"
    if raw is None:
        return Privilege()
    if not isinstance(raw, Mapping):
        raise ConfigError("expected a mapping with a type (ALL_PERMITTED or DATABASE_PERMITTED)", file=file, key=key)
    refuse_unknown_keys(raw, {"type", "props"}, file=file, prefix=f"{key}.")
    kind = _ALIASES.get(str(raw.get("type") or ALL_PERMITTED).strip().upper())
    if kind is None:
        raise ConfigError(f"unknown privilege type {raw.get('type')!r}: shardproxy implements ALL_PERMITTED and "
                          "DATABASE_PERMITTED", file=file, key=f"{key}.type")
    props = raw.get("props") or {}
    if not isinstance(props, Mapping):
        raise ConfigError("expected a mapping", file=file, key=f"{key}.props")
    if kind == ALL_PERMITTED:
        return Privilege()
    text = props.get(MAPPINGS_KEY)
    if isinstance(text, list):
        text = ",".join(str(t) for t in text)
    mkey = f"{key}.props.{MAPPINGS_KEY}"
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("DATABASE_PERMITTED needs user-database-mappings, e.g. 'root@%=*, app@%=sharding_db'",
                          file=file, key=mkey)
    known = {(u.user.lower(), (u.host or "%").lower()) for u in users}
    names = {n for n, _h in known}
    mappings: list[Grant] = []
    for entry in text.split(","):
        entry = entry.strip()
        grantee, eq, database = entry.partition("=")
        if not eq or "@" not in grantee or not database.strip():
            raise ConfigError(f"invalid mapping {entry!r}: the format is username@hostname=database (or =*)",
                              file=file, key=mkey)
        user, _, host = grantee.strip().partition("@")
        m = Grant(user.strip().lower(), host.strip().lower() or "%", database.strip().lower())
        if m.user not in names:
            warn(f"{file}: {mkey}: {entry!r} names no user of authority.users")
        mappings.append(m)
    return Privilege(DATABASE_PERMITTED, tuple(mappings))


__all__ = ["ER_DBACCESS_DENIED_ERROR", "Privilege", "denied_message", "parse_privilege"]
