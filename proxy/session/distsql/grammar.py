"""Recognising DistSQL (ShardingSphere 5.5.2's RQL / RAL / RDL / RUL) by regular expressions.

`parse()` returns the statements shardproxy answers, with their arguments; `looks_like_distsql()` tells
the rest of ShardingSphere's DistSQL apart from SQL, so that those get a clear "not supported by
shardproxy" error instead of a backend's syntax error (they are never sent to a backend). Both look at
the first words only, and `MAYBE_DISTSQL` lets `proxy.session.statements.classify` skip them for the statements
that cannot be DistSQL (SELECT, INSERT, ...).

The grammar follows ShardingSphere 5.5.2's ANTLR files (parser/distsql/engine, features/*/distsql/parser,
kernel/*/distsql/parser): keywords are case-insensitive, names may be back-quoted, strings are single- or
double-quoted, a trailing `;` is allowed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
STRING = r"(?:'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|\"[^\"\\]*(?:(?:\\.|\"\")[^\"\\]*)*\")"
_END = r"\s*;?\s*$"
_FROM_DB = rf"(?:\s+FROM\s+(?P<database>{IDENT}))?"
_LIKE = rf"(?:\s+LIKE\s+(?P<like>{STRING}))?"

#: the first words a DistSQL statement may start with (SET, ALTER, ... also start SQL: `parse` decides)
MAYBE_DISTSQL = frozenset({
    "SHOW", "SET", "COUNT", "REFRESH", "FORCE", "EXPORT", "IMPORT", "CONVERT", "REGISTER", "UNREGISTER", "ALTER",
    "CREATE", "DROP", "LOAD", "UNLOAD", "FORMAT", "PARSE", "PREVIEW", "ENABLE", "DISABLE", "LABEL", "RELABEL",
    "UNLABEL", "LOCK", "UNLOCK", "MIGRATE", "START", "STOP", "CHECK", "COMMIT", "ROLLBACK", "CLEAR", "ADD",
    "RESET",
})  # fmt: skip


@dataclass(frozen=True)
class DistSQL:
    """One recognised statement: `kind` names it, the other fields are its (unquoted) arguments."""

    kind: str
    database: str | None = None  # FROM db
    name: str | None = None  # the table / rule / algorithm / variable / storage unit it is about
    like: str | None = None  # LIKE 'pattern'
    value: str | None = None  # SET DIST VARIABLE x = value
    file: str | None = None  # TO FILE 'path'
    storage_unit: str | None = None  # REFRESH TABLE METADATA ... FROM STORAGE UNIT su
    schema: str | None = None
    force: bool = False
    text: str = ""  # the statement (RDL definitions are parsed from it)


def unquote(token: str | None) -> str | None:
    """A name or a string literal without its quotes."""
    if token is None:
        return None
    if len(token) >= 2 and token[0] == token[-1] == "`":
        return token[1:-1].replace("``", "`")
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
        q = token[0]
        body = token[1:-1].replace(q + q, q)
        # MySQL's escapes; \% and \_ keep their backslash (so that LIKE patterns can match them literally)
        return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "0": "\0", "%": "\\%", "_": "\\_"}.get(
            m.group(1), m.group(1)), body)
    return token


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile("^" + pattern + _END, re.I | re.S)


_STATEMENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # RQL: sharding
    ("show_sharding_algorithms", _rx(rf"SHOW\s+SHARDING\s+ALGORITHMS{_FROM_DB}")),
    ("show_sharding_key_generators", _rx(rf"SHOW\s+SHARDING\s+KEY\s+GENERATORS{_FROM_DB}")),
    ("show_sharding_auditors", _rx(rf"SHOW\s+SHARDING\s+AUDITORS{_FROM_DB}")),
    ("show_default_sharding_strategy", _rx(rf"SHOW\s+DEFAULT\s+SHARDING\s+STRATEGY{_FROM_DB}")),
    ("show_sharding_table_reference_rules",
     _rx(rf"SHOW\s+SHARDING\s+TABLE\s+REFERENCE\s+(?:RULES|RULE\s+(?P<name>{IDENT})){_FROM_DB}")),
    ("show_unused_sharding_algorithms", _rx(rf"SHOW\s+UNUSED\s+SHARDING\s+ALGORITHMS{_FROM_DB}")),
    ("show_unused_sharding_key_generators", _rx(rf"SHOW\s+UNUSED\s+SHARDING\s+KEY\s+GENERATORS{_FROM_DB}")),
    ("show_unused_sharding_auditors", _rx(rf"SHOW\s+UNUSED\s+SHARDING\s+AUDITORS{_FROM_DB}")),
    ("show_rules_used_algorithm",
     _rx(rf"SHOW\s+SHARDING\s+TABLE\s+RULES\s+USED\s+ALGORITHM\s+(?P<name>{IDENT}){_FROM_DB}")),
    ("show_rules_used_key_generator",
     _rx(rf"SHOW\s+SHARDING\s+TABLE\s+RULES\s+USED\s+KEY\s+GENERATOR\s+(?P<name>{IDENT}){_FROM_DB}")),
    ("show_rules_used_auditor",
     _rx(rf"SHOW\s+SHARDING\s+TABLE\s+RULES\s+USED\s+AUDITOR\s+(?P<name>{IDENT}){_FROM_DB}")),
    ("count_rule",
     _rx(rf"COUNT\s+(?P<name>SHARDING|BROADCAST|READWRITE_SPLITTING|ENCRYPT|MASK|SHADOW)\s+RULE{_FROM_DB}")),
    # RQL: encrypt (proxy.session.distsql.encrypt_rules)
    ("show_encrypt_rules",
     _rx(rf"SHOW\s+ENCRYPT\s+(?:RULES|(?:TABLE\s+)?RULE\s+(?P<name>{IDENT})){_FROM_DB}")),
    ("count_single_table", _rx(rf"COUNT\s+SINGLE\s+TABLE{_FROM_DB}")),
    # RQL: broadcast, single, storage units, logical tables
    ("show_broadcast_table_rules", _rx(rf"SHOW\s+BROADCAST\s+TABLE\s+RULES{_FROM_DB}")),
    # RQL / RAL: mask and shadow (proxy.session.distsql.feature_rules)
    ("show_mask_rules", _rx(rf"SHOW\s+MASK\s+(?:TABLE\s+)?(?:RULES|RULE\s+(?P<name>{IDENT})){_FROM_DB}")),
    ("show_mask_algorithm_plugins", _rx(r"SHOW\s+MASK\s+ALGORITHM\s+PLUGINS")),
    ("show_shadow_rules", _rx(rf"SHOW\s+SHADOW\s+(?:RULES|RULE\s+(?P<name>{IDENT})){_FROM_DB}")),
    ("show_shadow_table_rules", _rx(rf"SHOW\s+SHADOW\s+TABLE\s+(?:RULES|RULE\s+(?P<name>{IDENT})){_FROM_DB}")),
    ("show_shadow_algorithms", _rx(rf"SHOW\s+SHADOW\s+ALGORITHMS{_FROM_DB}")),
    ("show_default_shadow_algorithm", _rx(rf"SHOW\s+DEFAULT\s+SHADOW\s+ALGORITHM{_FROM_DB}")),
    ("show_shadow_algorithm_plugins", _rx(r"SHOW\s+SHADOW\s+ALGORITHM\s+PLUGINS")),
    ("show_single_tables", _rx(rf"SHOW\s+SINGLE\s+TABLES{_FROM_DB}{_LIKE}")),
    ("show_single_table", _rx(rf"SHOW\s+SINGLE\s+TABLE\s+(?!RULES?\b)(?P<name>{IDENT}){_FROM_DB}")),  # before 5.4
    ("show_default_single_table_storage_unit", _rx(rf"SHOW\s+DEFAULT\s+SINGLE\s+TABLE\s+STORAGE\s+UNIT{_FROM_DB}")),
    ("show_rules_used_storage_unit", _rx(rf"SHOW\s+RULES\s+USED\s+STORAGE\s+UNIT\s+(?P<name>{IDENT}){_FROM_DB}")),
    ("show_storage_units_like", _rx(rf"SHOW\s+STORAGE\s+UNITS{_FROM_DB}\s+LIKE\s+(?P<like>{STRING})")),
    ("show_logical_tables", _rx(rf"SHOW\s+(?P<full>FULL\s+)?LOGICAL\s+TABLES{_FROM_DB}{_LIKE}")),
    ("show_table_metadata",  # issue 17 (proxy.backends.table_metadata)
     _rx(rf"SHOW\s+TABLE\s+METADATA\s+{IDENT}(?:\s*,\s*{IDENT})*{_FROM_DB}")),
    # RAL
    ("show_dist_variable", _rx(rf"SHOW\s+DIST\s+VARIABLE\s+WHERE\s+NAME\s*=\s*(?P<name>{IDENT}|{STRING})")),
    ("show_dist_variables", _rx(rf"SHOW\s+DIST\s+VARIABLES{_LIKE}")),
    ("set_dist_variable",
     _rx(rf"SET\s+DIST\s+VARIABLE\s+(?P<name>{IDENT}|{STRING})\s*=\s*(?P<value>{STRING}|[-+]?[\w.$]+)")),
    ("show_compute_nodes", _rx(r"SHOW\s+COMPUTE\s+NODES")),
    # shardproxy's query digests (proxy.observe.digests)
    ("show_query_digests", _rx(r"SHOW\s+QUERY\s+DIGESTS(?:\s+LIMIT\s+(?P<value>\d+))?")),
    ("reset_query_digests", _rx(r"RESET\s+QUERY\s+DIGESTS")),
    ("refresh_table_metadata",
     _rx(rf"REFRESH\s+TABLE\s+METADATA(?:\s+(?!FROM\b)(?P<name>{IDENT}))?"
         rf"(?:\s+FROM\s+STORAGE\s+UNIT\s+(?P<storage_unit>{IDENT})(?:\s+SCHEMA\s+(?P<schema>{IDENT}))?)?")),
    ("refresh_database_metadata", _rx(rf"(?P<force>FORCE\s+)?REFRESH\s+DATABASE\s+METADATA(?:\s+(?P<name>{IDENT}))?")),
    ("export_database_configuration",
     _rx(rf"EXPORT\s+DATABASE\s+CONFIGURATION{_FROM_DB}(?:\s+TO\s+FILE\s+(?P<file>{STRING}))?")),
    # RDL
    ("create_broadcast_table_rule", _rx(r"CREATE\s+BROADCAST\s+TABLE\s+RULE\s+.+")),
    ("drop_broadcast_table_rule", _rx(r"DROP\s+BROADCAST\s+TABLE\s+RULE\s+.+")),
    ("create_sharding_table_rule", _rx(r"CREATE\s+SHARDING\s+TABLE\s+RULE\s+.+")),
    ("alter_sharding_table_rule", _rx(r"ALTER\s+SHARDING\s+TABLE\s+RULE\s+.+")),
    ("drop_sharding_table_rule", _rx(r"DROP\s+SHARDING\s+TABLE\s+RULE\s+.+")),
    ("create_encrypt_rule", _rx(r"CREATE\s+ENCRYPT\s+RULE\s+.+")),
    ("alter_encrypt_rule", _rx(r"ALTER\s+ENCRYPT\s+RULE\s+.+")),
    ("drop_encrypt_rule", _rx(r"DROP\s+ENCRYPT\s+RULE\s+.+")),
    ("create_mask_rule", _rx(r"CREATE\s+MASK\s+(?:TABLE\s+)?RULE\s+.+")),
    ("alter_mask_rule", _rx(r"ALTER\s+MASK\s+(?:TABLE\s+)?RULE\s+.+")),
    ("drop_mask_rule", _rx(r"DROP\s+MASK\s+(?:TABLE\s+)?RULE\s+.+")),
    ("create_shadow_rule", _rx(r"CREATE\s+SHADOW\s+RULE\s+.+")),
    ("alter_shadow_rule", _rx(r"ALTER\s+SHADOW\s+RULE\s+.+")),
    ("drop_shadow_rule", _rx(r"DROP\s+SHADOW\s+RULE\s+.+")),
    ("drop_shadow_algorithm", _rx(r"DROP\s+SHADOW\s+ALGORITHM\s+.+")),
    ("create_default_shadow_algorithm", _rx(r"CREATE\s+DEFAULT\s+SHADOW\s+ALGORITHM\s+.+")),
    ("alter_default_shadow_algorithm", _rx(r"ALTER\s+DEFAULT\s+SHADOW\s+ALGORITHM\s+.+")),
    ("drop_default_shadow_algorithm", _rx(r"DROP\s+DEFAULT\s+SHADOW\s+ALGORITHM(?:\s+IF\s+EXISTS)?")),
    ("register_storage_unit", _rx(r"REGISTER\s+STORAGE\s+UNIT\s+.+")),
    ("unregister_storage_unit", _rx(r"UNREGISTER\s+STORAGE\s+UNIT\s+.+")),
    # RAL: migration (proxy.migration)
    ("migrate_table", _rx(rf"MIGRATE\s+TABLE\s+(?P<name>{IDENT}){_FROM_DB}")),
    ("show_migration_list", _rx(r"SHOW\s+MIGRATION\s+LIST")),
    ("show_migration_check_status", _rx(rf"SHOW\s+MIGRATION\s+CHECK\s+STATUS\s+(?P<name>{STRING})")),
    ("show_migration_status", _rx(rf"SHOW\s+MIGRATION\s+STATUS\s+(?P<name>{STRING})")),
    ("check_migration", _rx(rf"CHECK\s+MIGRATION\s+(?P<name>{STRING})")),
    ("commit_migration", _rx(rf"COMMIT\s+MIGRATION\s+(?P<name>{STRING})")),
    ("rollback_migration", _rx(rf"ROLLBACK\s+MIGRATION\s+(?P<name>{STRING})")),
)  # fmt: skip

#: the migration statements (proxy.session.distsql.migration answers them)
MIGRATION_KINDS = frozenset({"migrate_table", "show_migration_list", "show_migration_check_status",
                             "show_migration_status", "check_migration", "commit_migration", "rollback_migration"})

#: RDL kinds above: rule changes at run time (proxy.session.distsql.rdl), only when that module supports them
RDL_KINDS = frozenset(kind for kind, _ in _STATEMENTS if kind.split("_", 1)[0] in ("create", "alter", "drop",
                                                                                   "register", "unregister"))


_BY_FIRST_WORD: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
for _kind, _pattern in _STATEMENTS:
    _first = _pattern.pattern[1:].split("\\", 1)[0].split("(", 1)[0].upper()
    _BY_FIRST_WORD.setdefault(_first, []).append((_kind, _pattern))
_BY_FIRST_WORD.setdefault("REFRESH", []).extend(_BY_FIRST_WORD.pop("", []))  # (FORCE )?REFRESH ...
_BY_FIRST_WORD["FORCE"] = _BY_FIRST_WORD["REFRESH"]
_FIRST = re.compile(r"[A-Za-z_]+")


def parse(text: str) -> DistSQL | None:
    """The DistSQL statement shardproxy answers, or None. `text` has no leading comments."""
    first = _FIRST.match(text)
    for kind, pattern in _BY_FIRST_WORD.get(first.group(0).upper() if first else "", ()):
        m = pattern.match(text)
        if m is None:
            continue
        g = m.groupdict()
        return DistSQL(
            kind,
            database=unquote(g.get("database")),
            name=unquote(g.get("name")),
            like=unquote(g.get("like")),
            value=unquote(g.get("value")),
            file=unquote(g.get("file")),
            storage_unit=unquote(g.get("storage_unit")),
            schema=unquote(g.get("schema")),
            force=bool(g.get("force") or g.get("full")),
            text=text,
        )
    return None


# --- the rest of DistSQL: recognised, refused ----------------------------------------------------------------

# Word sequences that start a DistSQL statement and no SQL statement (MySQL or MariaDB). `SHOW TRANSACTION
# RULE` / `ALTER TRANSACTION RULE` are left out on purpose: they belong to the XA work (issue 18).
_PREFIXES: tuple[tuple[str, ...], ...] = tuple(tuple(p.split()) for p in (
    "SHOW SHARDING", "SHOW BROADCAST", "SHOW SINGLE", "SHOW READWRITE_SPLITTING", "SHOW ENCRYPT", "SHOW MASK",
    "SHOW SHADOW", "SHOW DIST", "SHOW DEFAULT", "SHOW UNUSED", "SHOW UNLOADED", "SHOW RULES", "SHOW COMPUTE",
    "SHOW LOGICAL", "SHOW FULL LOGICAL", "SHOW TABLE METADATA", "SHOW STATUS FROM READWRITE_SPLITTING",
    "SHOW PLUGINS OF", "SHOW KEY GENERATE", "SHOW LOAD BALANCE", "SHOW MIGRATION", "SHOW STREAMING",
    "SHOW AUTHORITY", "SHOW SQL_PARSER", "SHOW SQL_FEDERATION", "SHOW SQL_TRANSLATOR", "SHOW GLOBAL CLOCK",
    "SHOW DB_DISCOVERY", "SHOW TRAFFIC", "SHOW INSTANCE", "SHOW SCALING", "SHOW STORAGE UNITS", "SHOW STORAGE NODES",
    "SET DIST", "SET DEFAULT SINGLE", "SET SHARDING HINT", "SET READWRITE_SPLITTING", "SET INSTANCE",
    "COUNT", "REFRESH", "FORCE REFRESH", "EXPORT", "IMPORT DATABASE", "IMPORT METADATA", "CONVERT YAML",
    "REGISTER", "UNREGISTER", "FORMAT", "PARSE", "PREVIEW", "ENABLE", "DISABLE", "LABEL", "RELABEL", "UNLABEL",
    "LOCK CLUSTER", "UNLOCK CLUSTER", "MIGRATE", "LOAD SINGLE", "UNLOAD", "CLEAR HINT", "CLEAR SHARDING HINT",
    "CLEAR READWRITE_SPLITTING HINT", "ADD RESOURCE", "SHOW QUERY DIGESTS", "RESET QUERY DIGESTS",
    *(f"{verb} {what}" for verb in ("START", "STOP", "CHECK", "COMMIT", "ROLLBACK", "DROP")
      for what in ("MIGRATION", "STREAMING")),
    *(f"{verb} {what}" for verb in ("CREATE", "ALTER", "DROP") for what in (
        "SHARDING", "BROADCAST", "READWRITE_SPLITTING", "ENCRYPT", "MASK", "SHADOW", "DEFAULT SHARDING",
        "DEFAULT SHADOW", "GLOBAL CLOCK", "SQL_PARSER", "SQL_FEDERATION", "SQL_TRANSLATOR", "DB_DISCOVERY",
        "TRAFFIC", "SHARDING_SCALING", "AUTHORITY", "RESOURCE")),
    "ALTER STORAGE UNIT", "ALTER COMPUTE NODE", "ALTER MIGRATION", "ALTER STREAMING",
))  # fmt: skip

# keywords that may continue a statement's name after its prefix ("SHOW ENCRYPT RULES", "DROP SHARDING KEY
# GENERATOR"): the name ends at the first word that is not one of them (a table name, FROM, IF, a quote ...)
_NAME_WORDS = frozenset("""
    RULE RULES TABLE TABLES ALGORITHM ALGORITHMS KEY GENERATOR GENERATORS AUDITOR AUDITORS STRATEGY REFERENCE
    NODES NODE PLUGINS STORAGE UNIT UNITS VARIABLE VARIABLES METADATA DATABASE CONFIGURATION USED LIST STATUS
    INFO MODE SOURCE CHECK HINT DEFAULT SINGLE SHARDING BROADCAST READWRITE_SPLITTING ENCRYPT MASK SHADOW
    COMPUTE GENERATE LOAD BALANCE TRANSACTION READ WRITE ALL CLUSTER YAML RESOURCE RESOURCES
""".split())
_WORDS = re.compile(r"[A-Za-z_]+")
_PREFIXES_BY_FIRST_WORD: dict[str, list[tuple[str, ...]]] = {}
for _prefix in _PREFIXES:
    _PREFIXES_BY_FIRST_WORD.setdefault(_prefix[0], []).append(_prefix)


# per first word, the prefixes in one expression: SQL that starts with SET, COMMIT, ALTER ... is told apart
# by one short match
_STARTS = {
    first: re.compile(r"^\s*" + first + r"(?:" + "|".join(
        sorted(("".join(r"\s+" + w for w in p[1:]) for p in prefixes), key=len, reverse=True)) + r")(?![\w(])", re.I)
    for first, prefixes in _PREFIXES_BY_FIRST_WORD.items()
}


def starts_like_distsql(text: str, first: str | None = None) -> bool:
    """Does `text` (no leading comments) start with the words of a DistSQL statement? Every statement
    `parse` knows does; SQL never does. `first`: its first word in upper case, when the caller has it."""
    if first is None:
        m = _FIRST.match(text)
        first = m.group(0).upper() if m else ""
    rx = _STARTS.get(first)
    return rx is not None and rx.match(text) is not None


def looks_like_distsql(text: str) -> str | None:
    """The statement's name ("CREATE ENCRYPT RULE") when `text` starts like DistSQL, else None."""
    if not starts_like_distsql(text):
        return None
    words = [w.upper() for w in _WORDS.findall(text[:160])[:8]]
    for prefix in _PREFIXES_BY_FIRST_WORD.get(words[0] if words else "", ()):
        if tuple(words[: len(prefix)]) == prefix and _starts_with_words(text, len(prefix)):
            name = list(prefix)
            for word in words[len(prefix):]:
                if word not in _NAME_WORDS:
                    break
                name.append(word)
            return " ".join(name)
    return None


def _starts_with_words(text: str, n: int) -> bool:
    """The first `n` tokens are plain words (so `SHOW DIST(...)` or `COUNT(*)` are not taken for DistSQL)."""
    return re.match(r"^\s*(?:[A-Za-z_]+\s+){" + str(n - 1) + r"}[A-Za-z_]+(?![(\w])", text) is not None
