"""The mask algorithms of ShardingSphere 5.5 with their exact outputs.

Each takes the value as the text MySQL sends it (ShardingSphere masks `String.valueOf` of the JDBC value, the same
text for the string and integer columns masking is meant for) and returns the masked text; NULL stays NULL and
the empty string stays empty. Their properties are checked as ShardingSphere checks them, so a configuration it
refuses is refused here too (`AlgorithmConfigError` names the property).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MaskFunction = Callable[[str], str]


class AlgorithmConfigError(ValueError):
    """A mask algorithm's properties that ShardingSphere would refuse at start-up; `prop` names the key."""

    def __init__(self, message: str, prop: str | None = None) -> None:
        super().__init__(message)
        self.prop = prop


@dataclass(frozen=True)
class MaskAlgorithm:
    """One configured algorithm: its type, its properties as written, and the masking it does."""

    type: str
    props: Mapping[str, Any]
    function: MaskFunction

    def mask(self, value: str | None) -> str | None:
        if value is None or (value == "" and self.type != "MD5"):  # (MD5 digests the empty string too)
            return value
        return self.function(value)


def _text(props: Mapping[str, Any], key: str) -> str:
    if key not in props or props[key] is None:
        raise AlgorithmConfigError(f"{key} is required", key)
    value = props[key]
    if isinstance(value, bool):  # YAML true/false: Java's Properties hold the text
        return "true" if value else "false"
    return str(value)


def _positive(props: Mapping[str, Any], key: str) -> int:
    raw = _text(props, key).strip()
    try:
        number = int(raw, 10)
    except ValueError:
        raise AlgorithmConfigError(f"{key} must be a valid integer number", key) from None
    if number <= 0:
        raise AlgorithmConfigError(f"{key} must be a positive integer.", key)
    return number


def _char(props: Mapping[str, Any], key: str) -> str:
    value = _text(props, key)
    if len(value) != 1:
        raise AlgorithmConfigError(f"{key}'s length must be one", key)
    return value


def _chars(props: Mapping[str, Any], key: str) -> str:
    value = _text(props, key)
    if not value:
        raise AlgorithmConfigError(f"{key}'s length must be at least one", key)
    return value


def _md5(props: Mapping[str, Any]) -> MaskFunction:
    salt = "" if props.get("salt") is None else str(props.get("salt"))

    def mask(value: str) -> str:
        return hashlib.md5((value + salt).encode("utf-8", "surrogateescape")).hexdigest()

    return mask


def _keep_first_n_last_m(props: Mapping[str, Any]) -> MaskFunction:
    n, m, c = _positive(props, "first-n"), _positive(props, "last-m"), _char(props, "replace-char")

    def mask(value: str) -> str:
        if len(value) < n + m:
            return value
        return value[:n] + c * (len(value) - n - m) + value[len(value) - m :]

    return mask


def _keep_from_x_to_y(props: Mapping[str, Any]) -> MaskFunction:
    x, y, c = _positive(props, "from-x"), _positive(props, "to-y"), _char(props, "replace-char")
    if x > y:
        raise AlgorithmConfigError("fromX must be less than or equal to toY", "from-x")

    def mask(value: str) -> str:
        head = c * min(x, len(value))
        middle = value[x : y + 1]
        tail = c * max(0, len(value) - (y + 1))
        return head + middle + tail

    return mask


def _mask_first_n_last_m(props: Mapping[str, Any]) -> MaskFunction:
    n, m, c = _positive(props, "first-n"), _positive(props, "last-m"), _char(props, "replace-char")

    def mask(value: str) -> str:
        chars = list(value)
        for i in range(min(n, len(chars))):
            chars[i] = c
        for i in range(len(chars) - min(m, len(chars)), len(chars)):
            chars[i] = c
        return "".join(chars)

    return mask


def _mask_from_x_to_y(props: Mapping[str, Any]) -> MaskFunction:
    x, y, c = _positive(props, "from-x"), _positive(props, "to-y"), _char(props, "replace-char")
    if x > y:
        raise AlgorithmConfigError("fromX must be less than or equal to toY", "from-x")

    def mask(value: str) -> str:
        if len(value) <= x:
            return value
        last = min(y, len(value) - 1)
        return value[:x] + c * (last - x + 1) + value[last + 1 :]

    return mask


def _mask_before_special_chars(props: Mapping[str, Any]) -> MaskFunction:
    special, c = _chars(props, "special-chars"), _char(props, "replace-char")

    def mask(value: str) -> str:
        index = value.find(special)
        return value if index <= 0 else c * index + value[index:]

    return mask


def _mask_after_special_chars(props: Mapping[str, Any]) -> MaskFunction:
    special, c = _chars(props, "special-chars"), _char(props, "replace-char")

    def mask(value: str) -> str:
        index = value.find(special)
        if index < 0:
            return value
        start = index + len(special)
        return value[:start] + c * (len(value) - start)

    return mask


_UPPER = "A,B,C,D,E,F,G,H,I,J,K,L,M,N,O,P,Q,R,S,T,U,V,W,X,Y,Z"
_LOWER = "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z"
_DIGITS = "0,1,2,3,4,5,6,7,8,9"
_SPECIAL = "~,!,@,#,$,%,^,&,*,:,<,>,|"


def _codes(props: Mapping[str, Any], key: str, default: str) -> list[str]:
    """A comma-separated code list: the first character of each trimmed item (as ShardingSphere takes it)."""
    raw = default if props.get(key) is None else str(props[key])
    items = [item.strip() for item in raw.split(",")]
    if any(not item for item in items):
        raise AlgorithmConfigError(f"'{key}' must be not empty", key)
    return [item[0] for item in items]


def _generic_table_random_replace(props: Mapping[str, Any]) -> MaskFunction:
    upper = _codes(props, "uppercase-letter-codes", _UPPER)
    lower = _codes(props, "lowercase-letter-codes", _LOWER)
    digits = _codes(props, "digital-codes", _DIGITS)
    special = _codes(props, "special-codes", _SPECIAL)
    pick = random.SystemRandom().choice  # (ShardingSphere draws from a SecureRandom)

    def mask(value: str) -> str:
        out = []
        for ch in value:
            if "A" <= ch <= "Z":
                out.append(pick(upper))
            elif "a" <= ch <= "z":
                out.append(pick(lower))
            elif "0" <= ch <= "9":
                out.append(pick(digits))
            else:
                out.append(pick(special))
        return "".join(out)

    return mask


ALGORITHMS: dict[str, Callable[[Mapping[str, Any]], MaskFunction]] = {
    "MD5": _md5,
    "KEEP_FIRST_N_LAST_M": _keep_first_n_last_m,
    "KEEP_FROM_X_TO_Y": _keep_from_x_to_y,
    "MASK_FIRST_N_LAST_M": _mask_first_n_last_m,
    "MASK_FROM_X_TO_Y": _mask_from_x_to_y,
    "MASK_BEFORE_SPECIAL_CHARS": _mask_before_special_chars,
    "MASK_AFTER_SPECIAL_CHARS": _mask_after_special_chars,
    "GENERIC_TABLE_RANDOM_REPLACE": _generic_table_random_replace,
}


def make_algorithm(type_name: str, props: Mapping[str, Any] | None = None) -> MaskAlgorithm:
    """The algorithm `type_name` (case-insensitive, as ShardingSphere's SPI lookup) with `props`."""
    kind = str(type_name).strip().upper()
    factory = ALGORITHMS.get(kind)
    if factory is None:
        raise AlgorithmConfigError(f"unknown mask algorithm type {type_name!r} (known: {', '.join(ALGORITHMS)})")
    props = dict(props or {})
    return MaskAlgorithm(kind, props, factory(props))


__all__ = ["ALGORITHMS", "AlgorithmConfigError", "MaskAlgorithm", "make_algorithm"]
