"""proxy.execution.memo.IdentityMemo: values kept by the object's identity, never another object's, within a bound."""

from __future__ import annotations

from proxy.execution.memo import IdentityMemo


def test_a_value_is_the_objects_own() -> None:
    memo: IdentityMemo[str] = IdentityMemo(4)
    a, b = ["t_order_0"], ["t_order_0"]  # equal, not the same object
    assert memo.get(a) is None
    assert memo.put(a, "kept") == "kept"
    assert memo.get(a) == "kept"
    assert memo.get(b) is None


def test_an_entry_holds_its_object_so_its_id_is_not_taken() -> None:
    memo: IdentityMemo[int] = IdentityMemo(4)
    memo.put([1], 1)  # the list lives on in the entry: no new object can get its id while the entry does
    others = [[2] for _ in range(100)]
    assert all(memo.get(o) is None for o in others)


def test_a_full_memo_starts_over() -> None:
    memo: IdentityMemo[int] = IdentityMemo(3)
    objs = [object() for _ in range(4)]
    for i, o in enumerate(objs):
        memo.put(o, i)
    assert len(memo) == 1 and memo.get(objs[3]) == 3 and memo.get(objs[0]) is None
