"""What the mask and shadow RDL do to a database's document (proxy.session.distsql.mask_rdl / shadow_rdl): the
YAML ShardingSphere 5.5.2's converters make of each statement, and its refusals. No server needed; the document
is validated and applied by rdl.py (tests/integration/test_feature_rdl.py)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from proxy.session.distsql.errors import DistSQLError
from proxy.session.distsql.mask_rdl import mask_change
from proxy.session.distsql.rdl_changes import _HEADER
from proxy.session.distsql.rules import RULE_KEY
from proxy.session.distsql.shadow_rdl import shadow_change

START = {"databaseName": "d", "dataSources": {"db": {}, "shadow_db": {}, "db2": {}, "shadow_db2": {}}}
KEEP = "TYPE(NAME='KEEP_FIRST_N_LAST_M', PROPERTIES('first-n'=3, 'last-m'=4, 'replace-char'='*'))"
SQL_HINT = "TYPE(NAME='SQL_HINT')"
VALUE = "TYPE(NAME='VALUE_MATCH', PROPERTIES('operation'='insert', 'column'='user_id', 'value'=0))"
RULE_A = f"CREATE SHADOW RULE a (SOURCE=db, SHADOW=shadow_db, t_order ({VALUE}, {SQL_HINT}))"
RULE_B = f"CREATE SHADOW RULE b (SOURCE=db2, SHADOW=shadow_db2, t_order ({SQL_HINT}), t_item ({SQL_HINT}))"


def _apply(statements: list[str]) -> dict[str, Any]:
    doc: dict[str, Any] = dict(START)
    for sql in statements:
        kind = next(k for k, rx in _HEADER.items() if rx.match(sql) and ("MASK" in k.upper()) == ("MASK" in sql))
        m = _HEADER[kind].match(sql)
        assert m is not None
        change = mask_change if "mask" in kind else shadow_change
        doc, _summary = change(kind, m.group(2).strip().rstrip(";"), doc, bool(m.group(1)), "d")
    return doc


def _rule(doc: dict[str, Any]) -> dict[str, Any]:
    (rule,) = [{k: v for k, v in r.items() if k != RULE_KEY} for r in doc.get("rules") or []]
    return rule


# (statements, the rule afterwards as YAML)
CASES = [
    ([f"CREATE MASK RULE t_user (COLUMNS((NAME=phone, {KEEP}), (NAME=pwd, TYPE(NAME=MD5))))"], """
      tables: {t_user: {columns: {phone: {maskAlgorithm: t_user_phone_keep_first_n_last_m},
                                  pwd: {maskAlgorithm: t_user_pwd_md5}}}}
      maskAlgorithms:
        t_user_phone_keep_first_n_last_m: {type: KEEP_FIRST_N_LAST_M,
                                           props: {first-n: '3', last-m: '4', replace-char: '*'}}
        t_user_pwd_md5: {type: MD5}"""),
    (["CREATE MASK TABLE RULE t_user (COLUMNS((NAME=pwd, TYPE(NAME='MD5'))))",
      "CREATE MASK RULE IF NOT EXISTS t_user (COLUMNS((NAME=other, TYPE(NAME='MD5')))), "
      "t_two (COLUMNS((NAME=x, TYPE(NAME='MD5'))))"], """
      tables: {t_user: {columns: {pwd: {maskAlgorithm: t_user_pwd_md5}}},
               t_two: {columns: {x: {maskAlgorithm: t_two_x_md5}}}}
      maskAlgorithms: {t_user_pwd_md5: {type: MD5}, t_two_x_md5: {type: MD5}}"""),
    (["CREATE MASK RULE t_user (COLUMNS((NAME=pwd, TYPE(NAME='MD5'))))", "CREATE MASK RULE t_two "
      "(COLUMNS((NAME=x, TYPE(NAME='MD5'))))", f"ALTER MASK RULE T_USER (COLUMNS((NAME=pwd, {KEEP})))"], """
      tables: {T_USER: {columns: {pwd: {maskAlgorithm: t_user_pwd_keep_first_n_last_m}}},
               t_two: {columns: {x: {maskAlgorithm: t_two_x_md5}}}}
      maskAlgorithms:
        t_two_x_md5: {type: MD5}
        t_user_pwd_keep_first_n_last_m: {type: KEEP_FIRST_N_LAST_M,
                                         props: {first-n: '3', last-m: '4', replace-char: '*'}}"""),
    (["CREATE MASK RULE t_user (COLUMNS((NAME=pwd, TYPE(NAME='MD5'))))", "DROP MASK RULE t_user",
      "DROP MASK RULE IF EXISTS t_user, t_none"], "{tables: {}, maskAlgorithms: {}}"),
    ([RULE_A], """
      dataSources: {a: {productionDataSourceName: db, shadowDataSourceName: shadow_db}}
      tables: {t_order: {dataSourceNames: [a], shadowAlgorithmNames: [a_t_order_value_match_0, a_t_order_sql_hint_1]}}
      shadowAlgorithms:
        a_t_order_value_match_0: {type: VALUE_MATCH, props: {operation: insert, column: user_id, value: '0'}}
        a_t_order_sql_hint_1: {type: SQL_HINT}"""),
    ([RULE_A, RULE_B, RULE_A.replace("CREATE SHADOW RULE", "CREATE SHADOW RULE IF NOT EXISTS")], """
      dataSources: {a: {productionDataSourceName: db, shadowDataSourceName: shadow_db},
                    b: {productionDataSourceName: db2, shadowDataSourceName: shadow_db2}}
      tables:
        t_order: {dataSourceNames: [a, b],
                  shadowAlgorithmNames: [a_t_order_value_match_0, a_t_order_sql_hint_1, b_t_order_sql_hint_0]}
        t_item: {dataSourceNames: [b], shadowAlgorithmNames: [b_t_item_sql_hint_0]}
      shadowAlgorithms:
        a_t_order_value_match_0: {type: VALUE_MATCH, props: {operation: insert, column: user_id, value: '0'}}
        a_t_order_sql_hint_1: {type: SQL_HINT}
        b_t_order_sql_hint_0: {type: SQL_HINT}
        b_t_item_sql_hint_0: {type: SQL_HINT}"""),
    ([RULE_A, RULE_B, "DROP SHADOW RULE b"], """
      dataSources: {a: {productionDataSourceName: db, shadowDataSourceName: shadow_db}}
      tables:
        t_order: {dataSourceNames: [a],
                  shadowAlgorithmNames: [a_t_order_value_match_0, a_t_order_sql_hint_1, b_t_order_sql_hint_0]}
      shadowAlgorithms:
        a_t_order_value_match_0: {type: VALUE_MATCH, props: {operation: insert, column: user_id, value: '0'}}
        a_t_order_sql_hint_1: {type: SQL_HINT}
        b_t_order_sql_hint_0: {type: SQL_HINT}"""),
    ([RULE_A, f"ALTER SHADOW RULE a (SOURCE=db2, SHADOW=shadow_db, t_item ({SQL_HINT}))"], """
      dataSources: {a: {productionDataSourceName: db2, shadowDataSourceName: shadow_db}}
      tables: {t_item: {dataSourceNames: [a], shadowAlgorithmNames: [a_t_item_sql_hint_0]}}
      shadowAlgorithms: {a_t_item_sql_hint_0: {type: SQL_HINT}}"""),
    ([RULE_A, "CREATE DEFAULT SHADOW ALGORITHM TYPE(NAME='SQL_HINT')",
      "CREATE DEFAULT SHADOW ALGORITHM IF NOT EXISTS TYPE(NAME='SQL_HINT', PROPERTIES('x'='y'))",
      "ALTER DEFAULT SHADOW ALGORITHM TYPE(NAME='SQL_HINT', PROPERTIES('foo'='bar'))", "DROP SHADOW RULE a"], """
      dataSources: {}
      tables: {}
      shadowAlgorithms: {default_shadow_algorithm: {type: SQL_HINT, props: {foo: bar}}}
      defaultShadowAlgorithmName: default_shadow_algorithm"""),
    (["CREATE DEFAULT SHADOW ALGORITHM TYPE(NAME='SQL_HINT')", "DROP DEFAULT SHADOW ALGORITHM",
      "DROP DEFAULT SHADOW ALGORITHM IF EXISTS", "DROP SHADOW ALGORITHM IF EXISTS nope"],
     "{dataSources: {}, tables: {}, shadowAlgorithms: {}}"),
]  # fmt: skip


@pytest.mark.parametrize(("statements", "expected"), CASES, ids=[" / ".join(c[0])[:90] for c in CASES])
def test_document_after(statements: list[str], expected: str) -> None:
    assert _rule(_apply(statements)) == yaml.safe_load(expected)


# (statements before, the refused statement, errno, its message)
REFUSALS = [
    ([], "ALTER MASK RULE t (COLUMNS((NAME=a, TYPE(NAME='MD5'))))", 1105, "Mask rule does not exist in database `d`"),
    ([], "DROP MASK RULE t", 1105, "Mask rule `t` does not exist in database `d`"),
    (["CREATE MASK RULE t (COLUMNS((NAME=a, TYPE(NAME='MD5'))))"], "CREATE MASK RULE t (COLUMNS((NAME=b, "
     "TYPE(NAME='MD5'))))", 1105, "Duplicate mask rule names `t` in database `d`"),
    (["CREATE MASK RULE t (COLUMNS((NAME=a, TYPE(NAME='MD5'))))"], "ALTER MASK RULE t, u", 1064,
     "expected table (COLUMNS((NAME=..., TYPE(...)), ...)), got t"),
    ([], "CREATE MASK RULE t (COLUMNS((NAME=a, TYPE(PROPERTIES('k'='v')))))", 1064, "TYPE(...) needs NAME='...'"),
    ([], "CREATE MASK RULE t (COLUMNS((NAME=a, FOO=b, TYPE(NAME='MD5'))))", 1064, "unexpected FOO=... in a column"),
    ([], RULE_A.replace("SOURCE=db", "SOURCE=dbx"), 1105, "Storage units `dbx` do not exist in database `d`"),
    ([], RULE_A.replace("RULE a", "RULE shadow_db"), 1105, "Invalid shadow rules `shadow_db`: the name is already"),
    ([], RULE_A + ", a (SOURCE=db, SHADOW=shadow_db, t_x (TYPE(NAME='SQL_HINT')))", 1105,
     "Duplicate shadow rule names `a` in the statement"),
    ([], f"CREATE SHADOW RULE a (SOURCE=db, SHADOW=shadow_db, t ({SQL_HINT}), T ({SQL_HINT}))", 1105,
     "Duplicate shadow table `T` in shadow rule `a`"),
    ([], "CREATE SHADOW RULE a (SOURCE=db, SHADOW=shadow_db)", 1064, "needs SOURCE=..., SHADOW=... and at least one"),
    ([], "CREATE SHADOW RULE a (SOURCE=db, SHADOW=shadow_db, t ())", 1064, "a shadow table needs TYPE(NAME='...')"),
    ([RULE_A], RULE_A, 1105, "Duplicate shadow rule names `a` in database `d`"),
    ([RULE_A], RULE_B.replace("CREATE", "ALTER"), 1105, "Shadow rules `b` do not exist in database `d`"),
    ([], RULE_B.replace("CREATE", "ALTER"), 1105, "Shadow rule does not exist in database `d`"),
    ([RULE_A], "DROP SHADOW RULE b", 1105, "Shadow rules `b` do not exist in database `d`"),
    ([RULE_A], "DROP SHADOW ALGORITHM a_t_order_sql_hint_1", 1105,
     "Shadow algorithm `a_t_order_sql_hint_1` in database `d` is still in use by shadow table `t_order`"),
    ([RULE_A, "CREATE DEFAULT SHADOW ALGORITHM TYPE(NAME=SQL_HINT)"], "DROP SHADOW ALGORITHM default_shadow_algorithm",
     1105, "is the default shadow algorithm of database `d`: DROP DEFAULT SHADOW ALGORITHM drops it"),
    ([RULE_A, "CREATE DEFAULT SHADOW ALGORITHM TYPE(NAME=SQL_HINT)"], "CREATE DEFAULT SHADOW ALGORITHM "
     "TYPE(NAME=SQL_HINT)", 1105, "`default_shadow_algorithm` already exists in database `d`: ALTER DEFAULT"),
    ([RULE_A], "ALTER DEFAULT SHADOW ALGORITHM TYPE(NAME=SQL_HINT)", 1105, "CREATE DEFAULT SHADOW ALGORITHM first"),
    ([RULE_A], "DROP DEFAULT SHADOW ALGORITHM", 1105, "Default shadow algorithm does not exist in database `d`"),
    ([RULE_A], "DROP SHADOW ALGORITHM x, y", 1105, "Shadow algorithms `x, y` do not exist in database `d`"),
]  # fmt: skip


@pytest.mark.parametrize(("before", "sql", "errno", "message"), REFUSALS, ids=[r[3][:60] for r in REFUSALS])
def test_refused(before: list[str], sql: str, errno: int, message: str) -> None:
    with pytest.raises(DistSQLError) as info:
        _apply([*before, sql])
    assert info.value.errno == errno and message in str(info.value), str(info.value)
