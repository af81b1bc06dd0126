"""Password scrambles for mysql_native_password and caching_sha2_password, both sides.

The proxy knows its users' plaintext passwords (ShardingSphere's `authority.users`), so it can check
either plugin's answer to its own scramble. caching_sha2_password's full path (no TLS) needs an RSA key
pair; `RsaKeyPair` is created lazily once per process because generating it costs tens of milliseconds.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from functools import cached_property

NATIVE_PASSWORD = "mysql_native_password"
CACHING_SHA2_PASSWORD = "caching_sha2_password"
CLEAR_PASSWORD = "mysql_clear_password"

# caching_sha2_password's AuthMoreData codes
FAST_AUTH_SUCCESS = b"\x03"
PERFORM_FULL_AUTHENTICATION = b"\x04"
REQUEST_PUBLIC_KEY = b"\x02"


def new_scramble() -> bytes:
    """20 random bytes without NUL or '$' so every client library accepts them."""
    out = bytearray()
    while len(out) < 20:
        for b in os.urandom(32):
            if b not in (0, 36) and b < 128 and len(out) < 20:
                out.append(b)
    return bytes(out)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def native_password_response(password: str, scramble: bytes) -> bytes:
    """What a client sends: SHA1(pw) XOR SHA1(scramble + SHA1(SHA1(pw)))."""
    if not password:
        return b""
    stage1 = hashlib.sha1(password.encode()).digest()
    stage2 = hashlib.sha1(stage1).digest()
    return _xor(stage1, hashlib.sha1(scramble[:20] + stage2).digest())


def check_native_password(password: str, scramble: bytes, response: bytes) -> bool:
    return hmac.compare_digest(native_password_response(password, scramble), response)


def caching_sha2_response(password: str, scramble: bytes) -> bytes:
    """What a client sends: SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + scramble)."""
    if not password:
        return b""
    p1 = hashlib.sha256(password.encode()).digest()
    p2 = hashlib.sha256(p1).digest()
    return _xor(p1, hashlib.sha256(p2 + scramble[:20]).digest())


def check_caching_sha2(password: str, scramble: bytes, response: bytes) -> bool:
    return hmac.compare_digest(caching_sha2_response(password, scramble), response)


def check_clear_password(password: str, response: bytes) -> bool:
    return hmac.compare_digest(password.encode(), response.rstrip(b"\x00"))


@dataclass
class RsaKeyPair:
    """The key caching_sha2_password's full authentication uses when the connection has no TLS."""

    bits: int = 2048

    @cached_property
    def _private(self):  # type: ignore[no-untyped-def]
        from cryptography.hazmat.primitives.asymmetric import rsa

        return rsa.generate_private_key(public_exponent=65537, key_size=self.bits)

    @cached_property
    def public_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self._private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def decrypt_password(self, encrypted: bytes, scramble: bytes) -> str:
        """Undo the client's RSA-OAEP(password + NUL XOR scramble)."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        plain = self._private.decrypt(
            encrypted, padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
        )
        unmasked = bytes(b ^ scramble[i % len(scramble)] for i, b in enumerate(plain))
        return unmasked.rstrip(b"\x00").decode("utf-8", errors="replace")
