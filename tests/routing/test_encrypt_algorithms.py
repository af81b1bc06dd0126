"""The encryptors give ShardingSphere's ciphertexts byte for byte.

Vectors: ShardingSphere 5.5.2's e2e `encrypt` scenario (env/scenario/encrypt/data/actual/dataset.xml holds the
stored ciphertexts of expected/dataset.xml's plaintexts, key `123456abc` with SHA-1, the LIKE fixture with mask
4093) and its algorithm unit tests (AES key `test`, MD5 with and without salt).
"""

from __future__ import annotations

from typing import Any

import pytest

from routing.encrypt.algorithms import create_encryptor

AES_E2E = {"aes-key-value": "123456abc", "digest-algorithm-name": "SHA-1"}
AES_UNIT = {"aes-key-value": "test", "digest-algorithm-name": "SHA-1"}


@pytest.mark.parametrize(
    ("props", "plain", "cipher"),
    [
        (AES_E2E, "zhangsan", "sVq8Lmm+j6bZE5EKSilJEQ=="),
        (AES_E2E, "111111", "aQol0b6th65d0aXe+zFPsQ=="),
        (AES_E2E, "zhangsan@gmail.com", "WM0fHOH91JNWnHTkiqBdyNmzk4uJ7CCz4mB1va9Ya1M="),
        (AES_E2E, "12345678900", "kLjLJIMnfyHT2nA+viaoaQ=="),
        (AES_E2E, "lisi", "fQ7IzBxKVuNHtUF6h6WSBg=="),
        (AES_E2E, "222222", "wuhmEKgdgrWQYt+Ev0hgGA=="),
        (AES_E2E, "lisi@gmail.com", "svATu3uWv9KfiloWJeWx3A=="),
        (AES_E2E, "wangwu@gmail.com", "nHJv9e6NiClIuGHOjHLvCAq2ZLhWcqfQ8/EQnIqMx+g="),
        (AES_E2E, "zhaoliu", "5NqS4YvpT+mHBFqZOZ3QDA=="),
        (AES_E2E, "86000001", "k/LC4zsaZ+N6RgluwW+8BQ=="),  # t_merchant.business_code
        (AES_E2E, "86100000002", "9SCFkitrhrqandvIXg2U5Q=="),  # t_merchant.telephone
        (AES_UNIT, "test", "dSpPiyENQGDUXMKFMJPGWA=="),
    ],
)
def test_aes_matches_shardingsphere(props: dict, plain: str, cipher: str) -> None:
    aes = create_encryptor("AES", props, key="k")
    assert aes.encrypt(plain) == cipher
    assert aes.decrypt(cipher) == plain
    shared = _SHARED.setdefault(props["aes-key-value"], create_encryptor("AES", props, key="k"))
    assert shared.encrypt(plain) == cipher  # (its context kept from the cases before: one or two blocks each)


_SHARED: dict[str, Any] = {}


@pytest.mark.parametrize(
    ("plain", "like"),
    [
        ("zhangsan", "yi`mht`m"),
        ("lisi", "mhth"),
        ("wangwu", "x`mhxt"),
        ("zhaoliu", "yi`pmht"),
        ("12345678900", "01454589811"),
        ("12345678901", "01454589810"),
        ("12345678903", "01454589814"),
        ("86000001", "95111110"),  # t_merchant.business_code
        ("86100000002", "95011111111"),  # t_merchant.telephone
    ],
)
def test_char_digest_like_matches_shardingsphere(plain: str, like: str) -> None:
    encryptor = create_encryptor("IT.ENCRYPT.LIKE.FIXTURE", {"mask": "4093"}, key="k")
    assert encryptor.encrypt(plain) == like
    assert create_encryptor("CHAR_DIGEST_LIKE", {"mask": "4093"}, key="k").encrypt(plain) == like


def test_char_digest_like_keeps_wildcards_and_maps_by_the_dictionary() -> None:
    dictionary = "\u8c24\u6749\u5deb"  # props.dict: a character's index here is what is digested
    encryptor = create_encryptor("CHAR_DIGEST_LIKE", {"dict": dictionary}, key="k")
    # (index 0 + delta 1) & mask + start; a character outside the dictionary by its own code
    assert encryptor.encrypt("%\u8c24_") == "%" + chr(((0 + 1) & 0b1111_0111_1101) + 0x4E00) + "_"
    assert encryptor.encrypt("\u00e9") == chr((0xE9 + 1) & 0b1111_0111_1101)
    assert encryptor.encrypt("\u2603") == chr(((0x2603 + 1) & 0b1111_0111_1101) + 0x4E00)
    custom = create_encryptor("CHAR_DIGEST_LIKE", {"dict": "\u2603\u2604", "start": "100", "delta": "2"}, key="k")
    assert custom.encrypt("\u2604") == chr(((1 + 2) & 0b1111_0111_1101) + 100)
    # a supplementary character is two UTF-16 code units, each digested (Java's chars)
    assert len(encryptor.encrypt("\U0001f600")) == 2


def test_char_digest_like_without_a_dictionary_refuses_what_it_would_need_one_for() -> None:
    """ShardingSphere's default dictionary is not shipped: ASCII digests as ShardingSphere's does, anything else
    is refused rather than digested differently."""
    from routing.encrypt.algorithms import NoDictionary

    encryptor = create_encryptor("CHAR_DIGEST_LIKE", {}, key="k")
    assert encryptor.encrypt("lisi") == "mhth"
    with pytest.raises(NoDictionary, match=r"props\.dict"):
        encryptor.encrypt("\u8c24")


@pytest.mark.parametrize(
    ("props", "plain", "digest"),
    [
        ({}, "test", "098f6bcd4621d373cade4e832627b4f6"),
        ({"salt": "202cb962ac5907"}, "test", "0c243d2934937738f36514035d95344a"),
    ],
)
def test_md5_matches_shardingsphere(props: dict, plain: str, digest: str) -> None:
    assert create_encryptor("MD5", props, key="k").encrypt(plain) == digest


@pytest.mark.parametrize(("value", "text"), [(1000, "1000"), (None, None), (b"ab", "ab"), ("x", "x")])
def test_values_are_encrypted_as_their_text(value: object, text: str | None) -> None:
    aes = create_encryptor("AES", AES_E2E, key="k")
    assert aes.encrypt(value) == (None if text is None else aes.encrypt(text))


_E2E_CIPHER = b"WM0fHOH91JNWnHTkiqBdyNmzk4uJ7CCz4mB1va9Ya1M="


@pytest.mark.parametrize(
    "value",
    [
        _E2E_CIPHER,  # two blocks
        b"sVq8Lmm+j6bZE5EKSilJEQ==",
        b" sVq8Lmm+j6bZE5EKSilJEQ==\n",  # spaces around: decrypt strips them
        b"",  # nothing to decipher
        b"QUJD",  # not a whole block
        b"sVq8Lmm+j6bZE5EKSilJEQ",  # Base64 without its padding
        b"sVq8Lmm+j6bZE5EKSilJ!Q==",  # not Base64
        b"zhangsan",  # plaintext left in place
        b"AAAAAAAAAAAAAAAAAAAAAA==",  # a block of another key: bad padding
        b"\xff\xfe",  # not UTF-8
    ],
)
def test_aes_decrypt_bytes_is_decrypt_of_the_text(value: bytes) -> None:
    """The answers' relay deciphers bytes with a context kept across values: the same plaintext or the same refusal
    as `decrypt` of the text, and a refused value leaves nothing behind for the next one."""
    aes = create_encryptor("AES", AES_E2E, key="k")
    try:
        expected: object = aes.decrypt(value.decode("utf-8", errors="surrogateescape")).encode(
            "utf-8", errors="surrogateescape"
        )
    except Exception as exc:
        expected = type(exc)
    try:
        got: object = aes.decrypt_bytes(value)  # type: ignore[attr-defined]
    except Exception as exc:
        got = type(exc)
    assert got == expected
    assert aes.decrypt_bytes(_E2E_CIPHER) == b"zhangsan@gmail.com"  # type: ignore[attr-defined]
