"""TLS on the client side: the server's SSL context from ShardingSphere's props, and the upgrade of a
client connection after its SSLRequest.

MySQL clients do not wait for an answer to SSLRequest: their TLS ClientHello may arrive in the same read
as the request and sit in the stream's buffer already, where the TLS layer asyncio puts under the
connection would never see it. `upgrade` hands those bytes to the TLS layer before it reads anything else.
With no certificate configured, a self-signed one is made at start-up, as ShardingSphere and MySQL 8 do.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

import structlog

from proxy.config.props import default as prop_default
from routing.errors import ConfigError

log = structlog.get_logger("shardproxy.tls")

_VERSIONS = {
    "TLSV1": ssl.TLSVersion.TLSv1, "TLSV1.1": ssl.TLSVersion.TLSv1_1, "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
}


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def server_context(props: Mapping[str, Any], *, file: str = "global.yaml") -> ssl.SSLContext | None:
    """The SSL context for client connections, or None when `proxy-frontend-ssl-enabled` is off.

    Props: `proxy-frontend-ssl-version` (comma-separated, e.g. `TLSv1.2,TLSv1.3`: the lowest and highest
    are allowed), `proxy-frontend-ssl-cipher` (an OpenSSL cipher list for TLS 1.2 and below),
    `proxy-frontend-ssl-cert-file` / `proxy-frontend-ssl-key-file` (PEM; both or neither)."""
    if not _bool(props.get("proxy-frontend-ssl-enabled", False)):
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = str(props.get("proxy-frontend-ssl-version") or prop_default("proxy-frontend-ssl-version"))
    chosen = []
    for v in versions.split(","):
        key = v.strip().upper()
        if not key:
            continue
        if key not in _VERSIONS:
            raise ConfigError(f"{file}: props.proxy-frontend-ssl-version: unknown TLS version {v.strip()!r} "
                              f"(one or more of TLSv1.2, TLSv1.3)")
        chosen.append(_VERSIONS[key])
    if chosen:
        ctx.minimum_version = min(chosen)
        ctx.maximum_version = max(chosen)
    cipher = props.get("proxy-frontend-ssl-cipher")
    if cipher:
        try:
            ctx.set_ciphers(str(cipher))
        except ssl.SSLError as exc:
            raise ConfigError(f"{file}: props.proxy-frontend-ssl-cipher: {exc}") from exc
    cert, key_file = props.get("proxy-frontend-ssl-cert-file"), props.get("proxy-frontend-ssl-key-file")
    if bool(cert) != bool(key_file):
        raise ConfigError(f"{file}: props.proxy-frontend-ssl-cert-file and proxy-frontend-ssl-key-file go together")
    try:
        if cert:
            ctx.load_cert_chain(str(cert), str(key_file))
        else:
            _load_self_signed(ctx)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{file}: props.proxy-frontend-ssl-cert-file: cannot load {cert}: {exc}") from exc
    return ctx


def _load_self_signed(ctx: ssl.SSLContext) -> None:
    """A fresh RSA key and a certificate for it, valid for ten years, loaded from a temporary file that is
    removed at once (ssl loads certificates from files only)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shardproxy auto-generated certificate")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption())
    fd, path = tempfile.mkstemp(prefix="shardproxy-cert-", suffix=".pem")
    try:
        os.write(fd, pem)
        os.close(fd)
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)
    log.info("tls_self_signed_certificate", subject="shardproxy auto-generated certificate")


async def upgrade(writer: asyncio.StreamWriter, ctx: ssl.SSLContext, leftover: bytes, *,
                  timeout: float = 10.0) -> None:
    """Put TLS under the client connection (server side). `leftover`: bytes already read past the
    SSLRequest (the start of the ClientHello), given to the TLS layer before anything new is read."""
    transport = writer.transport
    plain = transport.get_protocol()
    # not one more byte for the plain protocol: start_tls runs in a later loop iteration, and a ClientHello read
    # before it (uvloop polls the socket in between) went to the plain protocol's buffer, after `leftover` was
    # taken, and the handshake waited for it until its timeout (seen with test_tls_on_uvloop under load); start_tls
    # resumes reading once its TLS protocol is in place
    transport.pause_reading()
    task = asyncio.ensure_future(writer.start_tls(ctx, ssl_handshake_timeout=timeout))
    if leftover:
        # the loop's start_tls swaps the transport's protocol for its TLS protocol and schedules that
        # protocol's connection_made and the transport's resume_reading; the socket is read again only in a
        # later loop iteration, so bytes fed right after those callbacks come first, as they came
        for _ in range(100):
            await asyncio.sleep(0)
            if transport.get_protocol() is not plain or task.done():
                break
        await asyncio.sleep(0)
        tls = transport.get_protocol()
        if tls is not plain and not task.done():
            _feed(tls, leftover)
    await task


def _feed(protocol: Any, data: bytes) -> None:
    if hasattr(protocol, "get_buffer") and hasattr(protocol, "buffer_updated"):
        while data:
            buf = protocol.get_buffer(len(data))
            n = min(len(buf), len(data))
            buf[:n] = data[:n]
            protocol.buffer_updated(n)
            data = data[n:]
    else:
        protocol.data_received(data)


__all__ = ["server_context", "upgrade"]
