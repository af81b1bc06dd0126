"""TLS toward the data sources when the JDBC URL asks for it (`useSSL=true`, `sslMode=REQUIRED` ...): pool,
admin and replica-monitor connections all encrypted, to a MariaDB whose user may only log in over TLS."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from proxy.config import load_config
from routing.errors import ConfigError
from tests.conftest import ServerFactory
from tests.integration.harness import start_proxy, write_conf


def _cert(tmp: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(7).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp / "server-cert.pem", tmp / "server-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture
def tls_server(mariadb_factory: ServerFactory, tmp_path: Path) -> Any:
    cert, key = _cert(tmp_path)
    server = mariadb_factory.many(1, extra_args=[f"--ssl-cert={cert}", f"--ssl-key={key}"])[0]
    server.execute("CREATE DATABASE tls_b")
    server.execute("CREATE USER 'secure'@'%' IDENTIFIED BY 'securepw' REQUIRE SSL")
    server.execute("GRANT ALL ON *.* TO 'secure'@'%'")
    return server, cert


def _conf(tmp: Path, server: Any, query: str) -> Path:
    conf = write_conf(tmp, {"tlsb": {"ds_0": (server, "tls_b")}})
    path = conf / "database-tlsb.yaml"
    text = path.read_text()
    text = text.replace("?useSSL=false", f"?{query}" if query else "")
    text = text.replace(f"username: {server.user}", "username: secure").replace(
        f"password: {server.password}", "password: securepw")
    path.write_text(text)
    return conf


@pytest.mark.parametrize("query", ["useSSL=true", "sslMode=REQUIRED", "useSSL=true&requireSSL=true"])
def test_the_url_turns_tls_on(tls_server: Any, tmp_path: Path, query: str) -> None:
    server, _cert_file = tls_server
    proxy = start_proxy(_conf(tmp_path / "conf", server, query))
    try:
        rows = proxy.query("SHOW SESSION STATUS LIKE 'Ssl_cipher'", "tlsb")  # passed through: the backend's own
        assert rows and rows[0][1], rows
    finally:
        proxy.stop()


def test_verify_ca_with_the_servers_certificate(tls_server: Any, tmp_path: Path) -> None:
    server, cert_file = tls_server
    proxy = start_proxy(_conf(tmp_path / "conf", server, f"sslMode=VERIFY_CA&serverSslCert={cert_file}"))
    try:
        rows = proxy.query("SHOW SESSION STATUS LIKE 'Ssl_version'", "tlsb")
        assert rows[0][1].startswith("TLS"), rows
    finally:
        proxy.stop()


def test_without_tls_in_the_url_the_connections_are_plain(tls_server: Any, tmp_path: Path) -> None:
    server, _cert_file = tls_server
    conf = write_conf(tmp_path / "conf", {"tlsb": {"ds_0": (server, "tls_b")}})  # root, useSSL=false
    proxy = start_proxy(conf)
    try:
        assert proxy.query("SHOW SESSION STATUS LIKE 'Ssl_cipher'", "tlsb") == [("Ssl_cipher", "")]
    finally:
        proxy.stop()


@pytest.mark.parametrize("query,mode", [
    ("useSSL=false", None), ("", None), ("sslMode=DISABLED", None), ("sslMode=PREFERRED", None),
    ("useSSL=true", "required"), ("sslMode=required", "required"), ("sslMode=VERIFY_CA", "verify_ca"),
    ("sslMode=VERIFY_IDENTITY", "verify_identity"), ("useSSL=true&verifyServerCertificate=true", "verify_ca"),
])
def test_url_ssl_settings(tmp_path: Path, query: str, mode: str | None) -> None:
    (tmp_path / "global.yaml").write_text("props: {}\n")
    (tmp_path / "database-x.yaml").write_text(
        f"databaseName: x\ndataSources:\n  ds:\n    url: jdbc:mysql://127.0.0.1:3306/x{'?' + query if query else ''}\n"
        "    username: root\n    password: ''\n")
    assert load_config(tmp_path).databases["x"].data_sources["ds"].ssl_mode == mode


def test_an_unknown_ssl_mode_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / "global.yaml").write_text("props: {}\n")
    (tmp_path / "database-x.yaml").write_text(
        "databaseName: x\ndataSources:\n  ds:\n    url: jdbc:mysql://127.0.0.1:3306/x?sslMode=SOMETIMES\n"
        "    username: root\n    password: ''\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert "sslMode" in str(info.value) and "database-x.yaml" in str(info.value)
