"""The mask algorithms' outputs and property checks, case by case from ShardingSphere 5.5's own unit tests, and the
`!MASK` rule's loading."""

from __future__ import annotations

import pytest

from routing.errors import ConfigError
from routing.mask.algorithms import AlgorithmConfigError, make_algorithm
from routing.mask.config import load_mask_rule

KF35 = {"first-n": 3, "last-m": 5, "replace-char": "*"}
KF55 = {"first-n": 5, "last-m": 5, "replace-char": "*"}
XY35 = {"from-x": 3, "to-y": 5, "replace-char": "*"}
XY55 = {"from-x": 5, "to-y": 5, "replace-char": "*"}
SP = {"special-chars": "d1", "replace-char": "*"}

# (type, props, plain value, masked value)
MASK_CASES = [
    ("MD5", {}, None, None),
    ("MD5", {}, "abc123456", "0659c7992e268962384eb17fafe88364"),
    ("MD5", {"salt": "202cb962ac5907"}, "abc123456", "02d44390e9354b72dd2aa78d55016f7f"),
    ("KEEP_FIRST_N_LAST_M", KF35, None, None),
    ("KEEP_FIRST_N_LAST_M", KF35, "", ""),
    ("KEEP_FIRST_N_LAST_M", KF35, "abc123456", "abc*23456"),
    ("KEEP_FIRST_N_LAST_M", KF35, "ab", "ab"),
    ("KEEP_FIRST_N_LAST_M", KF35, "abc", "abc"),
    ("KEEP_FIRST_N_LAST_M", KF35, "abc1", "abc1"),
    ("KEEP_FIRST_N_LAST_M", KF35, "abc12", "abc12"),
    ("KEEP_FIRST_N_LAST_M", KF35, "abc1234", "abc1234"),
    ("KEEP_FIRST_N_LAST_M", KF35, "abc12345", "abc12345"),
    ("KEEP_FIRST_N_LAST_M", KF55, "abc123456789", "abc12**56789"),
    ("KEEP_FIRST_N_LAST_M", KF55, "abc", "abc"),
    ("KEEP_FIRST_N_LAST_M", KF55, "abc12", "abc12"),
    ("KEEP_FIRST_N_LAST_M", KF55, "abc123456", "abc123456"),
    ("KEEP_FIRST_N_LAST_M", KF55, "abc1234567", "abc1234567"),
    ("KEEP_FROM_X_TO_Y", XY35, None, None),
    ("KEEP_FROM_X_TO_Y", XY35, "", ""),
    ("KEEP_FROM_X_TO_Y", XY35, "abc123456", "***123***"),
    ("KEEP_FROM_X_TO_Y", XY35, "abc", "***"),
    ("KEEP_FROM_X_TO_Y", XY35, "abc1", "***1"),
    ("KEEP_FROM_X_TO_Y", XY35, "abc12", "***12"),
    ("KEEP_FROM_X_TO_Y", XY35, "abc123", "***123"),
    ("KEEP_FROM_X_TO_Y", XY55, "abc123456", "*****3***"),
    ("KEEP_FROM_X_TO_Y", XY55, "abc", "***"),
    ("KEEP_FROM_X_TO_Y", XY55, "abc123", "*****3"),
    ("KEEP_FROM_X_TO_Y", XY55, "abc12", "*****"),
    ("MASK_FIRST_N_LAST_M", KF35, None, None),
    ("MASK_FIRST_N_LAST_M", KF35, "", ""),
    ("MASK_FIRST_N_LAST_M", KF35, "abc123456", "***1*****"),
    ("MASK_FIRST_N_LAST_M", KF35, "ab", "**"),
    ("MASK_FIRST_N_LAST_M", KF35, "abc", "***"),
    ("MASK_FIRST_N_LAST_M", KF35, "abc1", "****"),
    ("MASK_FIRST_N_LAST_M", KF35, "abc12", "*****"),
    ("MASK_FIRST_N_LAST_M", KF35, "abc1234", "*******"),
    ("MASK_FIRST_N_LAST_M", KF35, "abc12345", "********"),
    ("MASK_FIRST_N_LAST_M", KF55, "abc123456789", "*****34*****"),
    ("MASK_FIRST_N_LAST_M", KF55, "abc", "***"),
    ("MASK_FIRST_N_LAST_M", KF55, "abc12", "*****"),
    ("MASK_FIRST_N_LAST_M", KF55, "abc123456", "*********"),
    ("MASK_FIRST_N_LAST_M", KF55, "abc1234567", "**********"),
    ("MASK_FROM_X_TO_Y", XY35, None, None),
    ("MASK_FROM_X_TO_Y", XY35, "", ""),
    ("MASK_FROM_X_TO_Y", XY35, "abc123456", "abc***456"),
    ("MASK_FROM_X_TO_Y", XY35, "abc", "abc"),
    ("MASK_FROM_X_TO_Y", XY35, "abc1", "abc*"),
    ("MASK_FROM_X_TO_Y", XY35, "abc12", "abc**"),
    ("MASK_FROM_X_TO_Y", XY35, "abc123", "abc***"),
    ("MASK_FROM_X_TO_Y", XY55, "abc123456", "abc12*456"),
    ("MASK_FROM_X_TO_Y", XY55, "abc", "abc"),
    ("MASK_FROM_X_TO_Y", XY55, "abc123", "abc12*"),
    ("MASK_FROM_X_TO_Y", XY55, "abc12", "abc12"),
    ("MASK_BEFORE_SPECIAL_CHARS", SP, None, None),
    ("MASK_BEFORE_SPECIAL_CHARS", SP, "", ""),
    ("MASK_BEFORE_SPECIAL_CHARS", SP, "abcd134", "***d134"),
    ("MASK_BEFORE_SPECIAL_CHARS", SP, "abcd1234d1234", "***d1234d1234"),
    ("MASK_BEFORE_SPECIAL_CHARS", SP, "abcd234", "abcd234"),
    ("MASK_AFTER_SPECIAL_CHARS", SP, None, None),
    ("MASK_AFTER_SPECIAL_CHARS", SP, "", ""),
    ("MASK_AFTER_SPECIAL_CHARS", SP, "abcd134", "abcd1**"),
    ("MASK_AFTER_SPECIAL_CHARS", SP, "abcd1234d1234", "abcd1********"),
    ("MASK_AFTER_SPECIAL_CHARS", SP, "abcd234", "abcd234"),
    # the e2e `mask` scenario's rules over its dataset
    (
        "MASK_BEFORE_SPECIAL_CHARS",
        {"special-chars": "@", "replace-char": "*"},
        "zhangsan@gmail.com",
        "********@gmail.com",
    ),
    ("KEEP_FIRST_N_LAST_M", {"first-n": 3, "last-m": 4, "replace-char": "*"}, "12345678900", "123****8900"),
    ("MD5", {}, "111111", "96e79218965eb72c92a549dd5a330112"),
    ("GENERIC_TABLE_RANDOM_REPLACE", {}, None, None),
    ("GENERIC_TABLE_RANDOM_REPLACE", {}, "", ""),
    ("GENERIC_TABLE_RANDOM_REPLACE", {"special-codes": "~!@#"}, "!!", "~~"),  # one item: its first character
]


@pytest.mark.parametrize(("kind", "props", "plain", "masked"), MASK_CASES)
def test_mask(kind: str, props: dict[str, object], plain: str | None, masked: str | None) -> None:
    assert make_algorithm(kind, props).mask(plain) == masked


# (type, props, the property named in the refusal)
INVALID = [
    ("KEEP_FIRST_N_LAST_M", {"first-n": "", "last-m": 5, "replace-char": "*"}, "first-n"),
    ("KEEP_FIRST_N_LAST_M", {"first-n": 2, "last-m": "", "replace-char": "*"}, "last-m"),
    ("KEEP_FIRST_N_LAST_M", {"first-n": 2, "last-m": 5, "replace-char": ""}, "replace-char"),
    ("KEEP_FROM_X_TO_Y", {"from-x": "", "to-y": 5, "replace-char": "*"}, "from-x"),
    ("KEEP_FROM_X_TO_Y", {"from-x": 2, "to-y": "", "replace-char": "*"}, "to-y"),
    ("KEEP_FROM_X_TO_Y", {"from-x": 2, "to-y": 5, "replace-char": ""}, "replace-char"),
    ("KEEP_FROM_X_TO_Y", {"from-x": -3, "to-y": 5, "replace-char": "*"}, "from-x"),
    ("KEEP_FROM_X_TO_Y", {"from-x": 3, "to-y": -5, "replace-char": "*"}, "to-y"),
    ("KEEP_FROM_X_TO_Y", {"from-x": 5, "to-y": 2, "replace-char": "*"}, "from-x"),
    ("MASK_FIRST_N_LAST_M", {"first-n": "", "last-m": 5, "replace-char": "*"}, "first-n"),
    ("MASK_FIRST_N_LAST_M", {"first-n": 3, "last-m": "", "replace-char": "*"}, "last-m"),
    ("MASK_FIRST_N_LAST_M", {"first-n": 3, "last-m": 5, "replace-char": ""}, "replace-char"),
    ("MASK_FIRST_N_LAST_M", {"first-n": 0, "last-m": 5, "replace-char": "*"}, "first-n"),
    ("MASK_FIRST_N_LAST_M", {"first-n": "123.0", "last-m": 5, "replace-char": "*"}, "first-n"),
    ("MASK_FROM_X_TO_Y", {"from-x": "", "to-y": 5, "replace-char": "*"}, "from-x"),
    ("MASK_FROM_X_TO_Y", {"from-x": 3, "to-y": "", "replace-char": "*"}, "to-y"),
    ("MASK_FROM_X_TO_Y", {"from-x": 3, "to-y": 5, "replace-char": ""}, "replace-char"),
    ("MASK_FROM_X_TO_Y", {"from-x": -3, "to-y": 5, "replace-char": "*"}, "from-x"),
    ("MASK_FROM_X_TO_Y", {"from-x": 3, "to-y": -5, "replace-char": "*"}, "to-y"),
    ("MASK_FROM_X_TO_Y", {"from-x": 5, "to-y": 2, "replace-char": "*"}, "from-x"),
    ("MASK_FROM_X_TO_Y", {"from-x": 3, "to-y": 5, "replace-char": "**"}, "replace-char"),
    ("MASK_AFTER_SPECIAL_CHARS", {}, "special-chars"),
    ("MASK_AFTER_SPECIAL_CHARS", {"special-chars": ""}, "special-chars"),
    ("MASK_AFTER_SPECIAL_CHARS", {"special-chars": "d1", "replace-char": ""}, "replace-char"),
    ("MASK_AFTER_SPECIAL_CHARS", {"special-chars": "d1"}, "replace-char"),
    ("MASK_BEFORE_SPECIAL_CHARS", {"special-chars": ""}, "special-chars"),
    ("MASK_BEFORE_SPECIAL_CHARS", {"special-chars": "d1", "replace-char": ""}, "replace-char"),
    ("GENERIC_TABLE_RANDOM_REPLACE", {"digital-codes": ""}, "digital-codes"),
    ("GENERIC_TABLE_RANDOM_REPLACE", {"special-codes": "a,,b"}, "special-codes"),
]


@pytest.mark.parametrize(("kind", "props", "prop"), INVALID)
def test_invalid_props_refused(kind: str, props: dict[str, object], prop: str) -> None:
    with pytest.raises(AlgorithmConfigError) as refused:
        make_algorithm(kind, props)
    assert refused.value.prop == prop


@pytest.mark.parametrize(
    "props",
    [
        {},
        {
            "uppercase-letter-codes": "A,B,C,D",
            "lowercase-letter-codes": "a,b,c,d",
            "digital-codes": "1,2,3,4",
            "special-codes": "~,!,@,#",
        },
    ],
)
def test_generic_table_random_replace_draws_from_each_class(props: dict[str, str]) -> None:
    upper = props.get("uppercase-letter-codes", "ABCDEFGHIJKLMNOPQRSTUVWXYZ").replace(",", "")
    lower = props.get("lowercase-letter-codes", "abcdefghijklmnopqrstuvwxyz").replace(",", "")
    digits = props.get("digital-codes", "0123456789").replace(",", "")
    special = props.get("special-codes", "~!@#$%^&*:<>|").replace(",", "")
    algorithm = make_algorithm("GENERIC_TABLE_RANDOM_REPLACE", props)
    for _ in range(50):
        masked = algorithm.mask("Ab1!")
        assert masked is not None and len(masked) == 4
        assert masked[0] in upper and masked[1] in lower and masked[2] in digits and masked[3] in special


RULE = {
    "maskAlgorithms": {
        "md5_mask": {"type": "MD5"},
        "keep": {"type": "KEEP_FIRST_N_LAST_M", "props": {"first-n": 3, "last-m": 4, "replace-char": "*"}},
    },
    "tables": {
        "t_user": {"columns": {"Password": {"maskAlgorithm": "md5_mask"}, "telephone": {"maskAlgorithm": "keep"}}}
    },
}


def test_rule_loads() -> None:
    rule = load_mask_rule(RULE, "f.yaml", "rules[1]")
    assert rule.algorithm("T_USER", "password").type == "MD5"  # type: ignore[union-attr]
    assert rule.algorithm("t_user", "user_id") is None
    assert rule.touches(("t_user",)) and not rule.touches(("t_order",))


# (rule document, the key the refusal names)
BAD_RULES = [
    ({**RULE, "encryptors": {}}, "rules[1].encryptors"),
    ({**RULE, "tables": {"t_user": {"column": {}}}}, "rules[1].tables.t_user.column"),
    (
        {**RULE, "tables": {"t_user": {"columns": {"c": {"maskAlgorithm": "nope"}}}}},
        "rules[1].tables.t_user.columns.c.maskAlgorithm",
    ),
    (
        {**RULE, "tables": {"t_user": {"columns": {"c": {"algorithm": "md5_mask"}}}}},
        "rules[1].tables.t_user.columns.c.algorithm",
    ),
    ({**RULE, "maskAlgorithms": {"a": {"type": "NOPE"}}}, "rules[1].maskAlgorithms.a.type"),
    ({**RULE, "maskAlgorithms": {"a": {"type": "MD5", "prop": {}}}}, "rules[1].maskAlgorithms.a.prop"),
    (
        {**RULE, "maskAlgorithms": {"a": {"type": "MASK_FROM_X_TO_Y", "props": {"from-x": 1}}}},
        "rules[1].maskAlgorithms.a.props.to-y",
    ),
]


@pytest.mark.parametrize(("doc", "key"), BAD_RULES)
def test_rule_refused(doc: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_mask_rule(doc, "f.yaml", "rules[1]")
    assert refused.value.key == key
