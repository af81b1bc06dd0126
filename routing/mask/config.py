"""The `!MASK` rule read from a database's YAML (ShardingSphere 5.5's `YamlMaskRuleConfiguration`).

    - !MASK
      tables:
        t_user:
          columns:
            telephone:
              maskAlgorithm: keep_first_n_last_m_mask
      maskAlgorithms:
        keep_first_n_last_m_mask:
          type: KEEP_FIRST_N_LAST_M
          props: {first-n: 3, last-m: 4, replace-char: '*'}

Every key is checked (an unknown one is refused, as for the other rules), every algorithm is built at load time
(so a property ShardingSphere refuses stops the start with its key), and a column naming an algorithm that is not
defined is refused as ShardingSphere refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from routing.config import expect_mapping, refuse_unknown_keys
from routing.errors import ConfigError
from routing.mask.algorithms import AlgorithmConfigError, MaskAlgorithm, make_algorithm

_RULE_KEYS = {"tables", "maskAlgorithms"}
_TABLE_KEYS = {"columns"}
_COLUMN_KEYS = {"maskAlgorithm"}
_ALGORITHM_KEYS = {"type", "props"}


@dataclass(frozen=True)
class MaskColumn:
    table: str  # as configured
    column: str
    algorithm_name: str
    algorithm: MaskAlgorithm


@dataclass(frozen=True)
class MaskRule:
    """Masked columns by (table, column), both lower case (MySQL's names are case-insensitive here, and
    ShardingSphere looks both up case-insensitively); `algorithms` by name, in file order."""

    columns: Mapping[tuple[str, str], MaskColumn] = field(default_factory=dict)
    algorithms: Mapping[str, MaskAlgorithm] = field(default_factory=dict)
    tables: frozenset[str] = frozenset()

    def algorithm(self, table: str, column: str) -> MaskAlgorithm | None:
        found = self.columns.get((table.lower(), column.lower()))
        return None if found is None else found.algorithm

    def touches(self, logic_tables: tuple[str, ...] | list[str]) -> bool:
        """Whether a statement over these tables may return a masked column."""
        tables = self.tables
        for t in logic_tables:
            if t.lower() in tables:
                return True
        return False


_mapping = expect_mapping  # (routing.config)


def load_mask_rule(rule: Mapping[str, Any], file: str | None, key: str) -> MaskRule:
    """The rule of one `- !MASK` entry at `key` (e.g. `rules[1]`) of `file`."""
    refuse_unknown_keys(rule, _RULE_KEYS, file=file, prefix=f"{key}.")
    algorithms: dict[str, MaskAlgorithm] = {}
    for name, body in _mapping(rule.get("maskAlgorithms"), file, f"{key}.maskAlgorithms").items():
        where = f"{key}.maskAlgorithms.{name}"
        body = _mapping(body, file, where)
        refuse_unknown_keys(body, _ALGORITHM_KEYS, file=file, prefix=f"{where}.")
        if not body.get("type"):
            raise ConfigError("needs a type", file=file, key=f"{where}.type")
        props = _mapping(body.get("props"), file, f"{where}.props")
        try:
            algorithms[str(name)] = make_algorithm(str(body["type"]), props)
        except AlgorithmConfigError as exc:
            at = f"{where}.props.{exc.prop}" if exc.prop else f"{where}.type"
            raise ConfigError(f"{body['type']}: {exc}", file=file, key=at) from None
    columns: dict[tuple[str, str], MaskColumn] = {}
    for table, table_body in _mapping(rule.get("tables"), file, f"{key}.tables").items():
        where = f"{key}.tables.{table}"
        table_body = _mapping(table_body, file, where)
        refuse_unknown_keys(table_body, _TABLE_KEYS, file=file, prefix=f"{where}.")
        for column, column_body in _mapping(table_body.get("columns"), file, f"{where}.columns").items():
            at = f"{where}.columns.{column}"
            column_body = _mapping(column_body, file, at)
            refuse_unknown_keys(column_body, _COLUMN_KEYS, file=file, prefix=f"{at}.")
            name = column_body.get("maskAlgorithm")
            if not name:
                raise ConfigError("needs a maskAlgorithm", file=file, key=f"{at}.maskAlgorithm")
            algorithm = algorithms.get(str(name))
            if algorithm is None:
                raise ConfigError(
                    f"mask algorithm {name!r} is not defined under maskAlgorithms "
                    f"(defined: {', '.join(algorithms) or 'none'})",
                    file=file,
                    key=f"{at}.maskAlgorithm",
                )
            columns.setdefault(
                (str(table).lower(), str(column).lower()), MaskColumn(str(table), str(column), str(name), algorithm)
            )
    return MaskRule(columns, algorithms, frozenset(t for t, _c in columns))


__all__ = ["MaskColumn", "MaskRule", "load_mask_rule"]
