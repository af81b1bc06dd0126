"""The ``!ENCRYPT`` rule: which logical columns are stored encrypted, in which physical columns, by which encryptor.

ShardingSphere 5.5's YAML shape (``YamlEncryptRuleConfiguration``)::

    - !ENCRYPT
      tables:
        t_user:
          columns:
            password:                       # the logical column the application reads and writes
              cipher: {name: password_cipher, encryptorName: aes}        # decryptable ciphertext
              assistedQuery: {name: password_assisted, encryptorName: md5}  # optional: = and IN
              likeQuery: {name: password_like, encryptorName: like}      # optional: LIKE
      encryptors:
        aes: {type: AES, props: {aes-key-value: 123456abc, digest-algorithm-name: SHA-1}}

Everything is checked at load time (an unknown key, a missing cipher, an encryptor that cannot do what its column
asks, an unused or unknown encryptor name), as ShardingSphere's ``EncryptRuleConfigurationChecker`` does, so a
mistake stops the start with the key named instead of storing plaintext later.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from routing.config import expect_mapping, refuse_unknown_keys
from routing.encrypt.algorithms import Encryptor, create_encryptor
from routing.errors import ConfigError

__all__ = ["EncryptColumn", "EncryptRule", "EncryptTable", "load_encrypt_rule"]

_RULE_KEYS = frozenset({"tables", "encryptors"})
_TABLE_KEYS = frozenset({"name", "columns"})
_COLUMN_KEYS = frozenset({"name", "cipher", "assistedQuery", "likeQuery"})
_ITEM_KEYS = frozenset({"name", "encryptorName"})
_ENCRYPTOR_KEYS = frozenset({"type", "props"})


@dataclass(frozen=True, eq=False)
class EncryptColumn:
    """One logical column and the physical columns that hold it."""

    table: str
    name: str  # the logical column, as configured
    cipher: str
    cipher_encryptor: Encryptor
    cipher_encryptor_name: str
    assisted: str | None = None
    assisted_encryptor: Encryptor | None = None
    assisted_encryptor_name: str | None = None
    like: str | None = None
    like_encryptor: Encryptor | None = None
    like_encryptor_name: str | None = None

    def physical(self) -> tuple[str, ...]:
        """The physical columns a write of this column fills, in ShardingSphere's order."""
        return tuple(c for c in (self.cipher, self.assisted, self.like) if c)

    def encrypted_values(self, value: object) -> tuple[str | None, ...]:
        """The values a write stores for ``value`` in :meth:`physical`'s columns."""
        out = [self.cipher_encryptor.encrypt(value)]
        if self.assisted_encryptor is not None:
            out.append(self.assisted_encryptor.encrypt(value))
        if self.like_encryptor is not None:
            out.append(self.like_encryptor.encrypt(value))
        return tuple(out)

    def encryptors(self) -> tuple[Encryptor, ...]:
        """The encryptors of :meth:`physical`'s columns, in its order."""
        return tuple(e for e in (self.cipher_encryptor, self.assisted_encryptor, self.like_encryptor) if e is not None)

    def equality(self) -> tuple[str, Encryptor] | None:
        """The column and encryptor an equality condition compares: the assisted query column, else the cipher
        column when its encryptor is deterministic; None when neither can."""
        if self.assisted is not None and self.assisted_encryptor is not None:
            return self.assisted, self.assisted_encryptor
        if self.cipher_encryptor.equality:
            return self.cipher, self.cipher_encryptor
        return None


@dataclass(frozen=True, eq=False)
class EncryptTable:
    name: str
    columns: Mapping[str, EncryptColumn]  # lower-case logical name -> column
    hidden: frozenset[str]  # lower-case assisted and like query columns (never shown as columns of the table)
    ciphers: Mapping[str, EncryptColumn]  # lower-case cipher column -> its logical column


@dataclass(frozen=True, eq=False)
class EncryptRule:
    tables: Mapping[str, EncryptTable]  # lower-case table name -> table
    encryptors: Mapping[str, tuple[str, Mapping[str, str]]]  # name -> (type, props), as configured

    def table(self, name: str) -> EncryptTable | None:
        return self.tables.get(name.lower())


_mapping = expect_mapping  # (routing.config)


def load_encrypt_rule(
    doc: Mapping[str, Any],
    *,
    file: str | None = None,
    key: str = "rules[0]",
    types: Mapping[str, Callable[..., Encryptor]] | None = None,
) -> EncryptRule:
    """Build and check one ``!ENCRYPT`` rule document; ``ConfigError`` names the file and the dotted key."""
    refuse_unknown_keys(doc, _RULE_KEYS, file=file, prefix=f"{key}.")
    encryptors: dict[str, Encryptor] = {}
    configured: dict[str, tuple[str, Mapping[str, str]]] = {}
    for name, raw in _mapping(doc.get("encryptors"), file, f"{key}.encryptors").items():
        ekey = f"{key}.encryptors.{name}"
        spec = _mapping(raw, file, ekey)
        refuse_unknown_keys(spec, _ENCRYPTOR_KEYS, file=file, prefix=f"{ekey}.")
        type_name = spec.get("type")
        if not isinstance(type_name, str) or not type_name:
            raise ConfigError("needs a type", file=file, key=f"{ekey}.type")
        props = {
            str(k): "" if v is None else str(v) for k, v in _mapping(spec.get("props"), file, f"{ekey}.props").items()
        }
        try:
            encryptors[str(name)] = create_encryptor(type_name, props, key=ekey, types=types)
        except ConfigError as exc:
            raise ConfigError(exc.reason, file=file, key=exc.key) from None
        configured[str(name)] = (type_name, props)
    tables: dict[str, EncryptTable] = {}
    used: set[str] = set()
    for tname, traw in _mapping(doc.get("tables"), file, f"{key}.tables").items():
        tkey = f"{key}.tables.{tname}"
        tdoc = _mapping(traw, file, tkey)
        refuse_unknown_keys(tdoc, _TABLE_KEYS, file=file, prefix=f"{tkey}.")
        table_name = str(tdoc.get("name") or tname)
        columns: dict[str, EncryptColumn] = {}
        for cname, craw in _mapping(tdoc.get("columns"), file, f"{tkey}.columns").items():
            ckey = f"{tkey}.columns.{cname}"
            cdoc = _mapping(craw, file, ckey)
            refuse_unknown_keys(cdoc, _COLUMN_KEYS, file=file, prefix=f"{ckey}.")
            items: dict[str, tuple[str, Encryptor, str] | None] = {}
            for item, need, what in (
                ("cipher", "decrypts", "decrypt"),
                ("assistedQuery", "equality", "compare"),
                ("likeQuery", "like", "serve LIKE"),
            ):
                ikey = f"{ckey}.{item}"
                idoc = cdoc.get(item)
                if idoc is None:
                    if item == "cipher":
                        raise ConfigError("needs a cipher column", file=file, key=ikey)
                    items[item] = None
                    continue
                idoc = _mapping(idoc, file, ikey)
                refuse_unknown_keys(idoc, _ITEM_KEYS, file=file, prefix=f"{ikey}.")
                column = idoc.get("name")
                if not isinstance(column, str) or not column:
                    raise ConfigError("needs a name", file=file, key=f"{ikey}.name")
                enc_name = idoc.get("encryptorName")
                if not isinstance(enc_name, str) or enc_name not in encryptors:
                    known = ", ".join(encryptors) or "none"
                    raise ConfigError(
                        f"names no configured encryptor (encryptors: {known})", file=file, key=f"{ikey}.encryptorName"
                    )
                encryptor = encryptors[enc_name]
                if not getattr(encryptor, need):
                    raise ConfigError(
                        f"encryptor {enc_name!r} ({encryptor.type}) cannot {what}",
                        file=file,
                        key=f"{ikey}.encryptorName",
                    )
                used.add(enc_name)
                items[item] = (column, encryptor, enc_name)
            cipher = items["cipher"]
            assert cipher is not None
            assisted, like = items["assistedQuery"], items["likeQuery"]
            logical = str(cdoc.get("name") or cname)
            columns[logical.lower()] = EncryptColumn(
                table_name,
                logical,
                cipher[0],
                cipher[1],
                cipher[2],
                assisted[0] if assisted else None,
                assisted[1] if assisted else None,
                assisted[2] if assisted else None,
                like[0] if like else None,
                like[1] if like else None,
                like[2] if like else None,
            )
        physical: dict[str, str] = {}
        for col in columns.values():
            for p in col.physical():
                if p.lower() in physical or (p.lower() in columns and p.lower() != col.name.lower()):
                    raise ConfigError(f"column {p} is used twice", file=file, key=f"{tkey}.columns.{col.name}")
                physical[p.lower()] = col.name
        hidden = frozenset(c.lower() for col in columns.values() for c in (col.assisted, col.like) if c)
        ciphers = {col.cipher.lower(): col for col in columns.values()}
        tables[table_name.lower()] = EncryptTable(table_name, columns, hidden, ciphers)
    return EncryptRule(tables, configured)
