"""`protocol.auth` against vectors computed by PyMySQL's own implementation of each plugin."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import pytest
from pymysql import _auth as pymysql_auth

from protocol import auth
from tests.protocol.fixtures import client_frames, server_frames

SCRAMBLES = [bytes(range(1, 21)), b"h\"m$eUW6HFdHyH=7;c_7", bytes([0x7F] * 20)]
PASSWORDS = ["root", "sha2pw", "p@ss w0rd!", "пароль-密码-😀", "x" * 200]


@pytest.mark.parametrize("scramble", SCRAMBLES, ids=["counting", "captured", "7f"])
@pytest.mark.parametrize("password", PASSWORDS)
def test_native_password_matches_pymysql(password: str, scramble: bytes) -> None:
    expected = pymysql_auth.scramble_native_password(password.encode(), scramble)
    assert auth.native_password_response(password, scramble) == expected
    assert auth.check_native_password(password, scramble, expected)
    assert not auth.check_native_password(password + "x", scramble, expected)


@pytest.mark.parametrize("scramble", SCRAMBLES, ids=["counting", "captured", "7f"])
@pytest.mark.parametrize("password", PASSWORDS)
def test_caching_sha2_matches_pymysql(password: str, scramble: bytes) -> None:
    expected = pymysql_auth.scramble_caching_sha2(password.encode(), scramble)
    assert auth.caching_sha2_response(password, scramble) == expected
    assert auth.check_caching_sha2(password, scramble, expected)
    assert not auth.check_caching_sha2(password, bytes((scramble[0] ^ 1,)) + scramble[1:], expected)


# computed with PyMySQL: scramble_native_password(b"root", ...) and scramble_caching_sha2(b"sha2pw", ...)
KNOWN = [
    (auth.native_password_response, "root", "7762abf3fd9818d9f63e079f850167cb142a0965"),
    (auth.caching_sha2_response, "sha2pw", "fe434feaea0008ee32ed6f17ada1d8f6cb566f37da89870b57d086973fc4169b"),
]


@pytest.mark.parametrize(("fn", "password", "hexdigest"), KNOWN, ids=["native", "caching_sha2"])
def test_known_vectors(fn: Callable[[str, bytes], bytes], password: str, hexdigest: str) -> None:
    assert fn(password, bytes(range(1, 21))).hex() == hexdigest


@pytest.mark.parametrize("fn", [auth.native_password_response, auth.caching_sha2_response])
def test_empty_password_sends_nothing(fn: Callable[[str, bytes], bytes]) -> None:
    assert fn("", bytes(20)) == b""
    assert pymysql_auth.scramble_native_password(b"", bytes(20)) == b""


def test_native_password_of_a_real_login() -> None:
    """The captured raw login: root's answer to the sandbox's scramble."""
    from protocol.packets import HandshakeResponse41, HandshakeV10

    greeting = HandshakeV10.decode(server_frames("handshake")[0].payload)
    response = HandshakeResponse41.decode(client_frames("handshake")[0].payload)
    assert auth.check_native_password("root", greeting.auth_data, response.auth_response)


def test_clear_password() -> None:
    assert auth.check_clear_password("secret", b"secret\x00")
    assert not auth.check_clear_password("secret", b"secrex\x00")


def test_new_scramble_is_safe_for_every_client() -> None:
    for _ in range(50):
        s = auth.new_scramble()
        assert len(s) == 20 and all(0 < b < 128 and b != ord("$") for b in s)


@cache
def _key() -> auth.RsaKeyPair:
    return auth.RsaKeyPair(bits=1024)  # small: the test checks the padding and masking, not key strength


@pytest.mark.parametrize("password", ["sha2pw", "x" * 20, "x" * 21, "пароль😀", "a"])
def test_rsa_full_authentication_round_trip(password: str) -> None:
    key = _key()
    scramble = auth.new_scramble()
    assert key.public_pem.startswith(b"-----BEGIN PUBLIC KEY-----")
    encrypted = pymysql_auth.sha2_rsa_encrypt(password.encode(), scramble, key.public_pem)
    assert key.decrypt_password(encrypted, scramble) == password


def test_rsa_decrypt_with_the_wrong_scramble_does_not_give_the_password() -> None:
    key = _key()
    encrypted = pymysql_auth.sha2_rsa_encrypt(b"sha2pw", bytes(range(1, 21)), key.public_pem)
    assert key.decrypt_password(encrypted, bytes(range(2, 22))) != "sha2pw"


def test_rsa_garbage_raises_value_error() -> None:
    with pytest.raises(ValueError):
        _key().decrypt_password(b"\x00" * 128, bytes(20))
