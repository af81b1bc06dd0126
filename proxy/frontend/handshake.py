"""The connection phase: greet, authenticate against `authority.users`, pick the logical database.

Either auth plugin a client arrives with is accepted when the proxy can check it (it knows the
plaintext passwords); otherwise the client is switched to the user's configured plugin. Like MySQL,
caching_sha2_password asks for full authentication the first time a user logs in after start-up and
uses the fast path afterwards.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from protocol import auth, text
from protocol.constants import SERVER_CAPABILITIES, Capability, Collation, ErrorCode, ServerStatus
from protocol.errors import ServerError
from protocol.packets import (
    AuthMoreData,
    AuthSwitchRequest,
    ComChangeUser,
    HandshakeResponse41,
    HandshakeV10,
    SSLRequest,
)
from protocol.wire import MalformedPacket
from proxy.backends.charset import charset_for_collation
from proxy.config.model import UserConfig
from proxy.frontend import tls
from proxy.frontend.wire import ClientPackets

HANDSHAKE_TIMEOUT = 10.0


class HandshakeFailed(ServerError):
    """The client may not connect (or COM_CHANGE_USER to) as it asked: the ERR it gets."""

    def __init__(self, errno: int, message: str, sqlstate: str, user: str | None = None) -> None:
        super().__init__(message, errno=errno, sqlstate=sqlstate)
        self.user = user  # the user name the client gave, when it got that far (the audit log's failed login)


@dataclass
class AuthenticatedClient:
    user: UserConfig
    response: HandshakeResponse41
    capabilities: Capability
    secure: bool = False  # the session runs over TLS


class Authenticator:
    """Shared by all sessions: the user list, the RSA key and caching_sha2_password's cache."""

    def __init__(self, users: tuple[UserConfig, ...], tls: ssl.SSLContext | None = None) -> None:
        self.users = users
        self.tls = tls  # props.proxy-frontend-ssl-enabled: clients may switch to TLS after the greeting
        self.rsa = auth.RsaKeyPair()
        self._sha2_cache: set[tuple[str, str]] = set()

    def find_user(self, name: str, host: str) -> UserConfig | None:
        for u in self.users:
            if u.user == name and u.host_matches(host):
                return u
        return None

    def check(self, user: UserConfig, plugin: str, scramble: bytes, response: bytes) -> bool:
        if plugin == auth.NATIVE_PASSWORD:
            return auth.check_native_password(user.password, scramble, response)
        if plugin == auth.CACHING_SHA2_PASSWORD:
            return auth.check_caching_sha2(user.password, scramble, response)
        if plugin == auth.CLEAR_PASSWORD:
            return auth.check_clear_password(user.password, response)
        return False

    async def run(
        self, wire: ClientPackets, *, connection_id: int, server_version: str, client_host: str
    ) -> AuthenticatedClient:
        scramble = auth.new_scramble()
        default_plugin = auth.NATIVE_PASSWORD
        wire.seq = 0
        wire.send(
            HandshakeV10(
                server_version=server_version,
                connection_id=connection_id,
                auth_data=scramble,
                capabilities=SERVER_CAPABILITIES | (Capability.SSL if self.tls is not None else 0),
                character_set=Collation.UTF8MB4_GENERAL_CI,
                status=ServerStatus.AUTOCOMMIT,
                auth_plugin=default_plugin,
            ).encode()
        )
        await wire.flush()
        payload = await wire.read(HANDSHAKE_TIMEOUT)
        secure = False
        if SSLRequest.matches(payload):
            if self.tls is None:
                raise HandshakeFailed(
                    ErrorCode.HANDSHAKE_ERROR,
                    "TLS is not enabled on this proxy (props.proxy-frontend-ssl-enabled): connect without SSL "
                    "(mysql --ssl-mode=DISABLED or --skip-ssl, ssl_disabled=True in Python drivers)",
                    "08S01",
                )
            try:
                await tls.upgrade(wire.writer, self.tls, wire.take_unread(), timeout=HANDSHAKE_TIMEOUT)
            except (ssl.SSLError, OSError, TimeoutError) as exc:
                raise HandshakeFailed(ErrorCode.HANDSHAKE_ERROR, f"TLS handshake failed: {exc}", "08S01") from exc
            secure = True
            payload = await wire.read(HANDSHAKE_TIMEOUT)
        try:
            response = HandshakeResponse41.decode(payload)
        except MalformedPacket as exc:
            raise HandshakeFailed(ErrorCode.HANDSHAKE_ERROR, f"Bad handshake: {exc}", "08S01") from exc
        caps = Capability(response.capabilities & SERVER_CAPABILITIES)
        wire.capabilities = caps
        if response.database:
            # like MariaDB, before the password: a database name that is not in the client's character set
            bad = text.invalid_string(response.database, charset_for_collation(response.character_set))
            if bad is not None:
                raise HandshakeFailed(text.INVALID_CHARACTER_STRING, bad, "HY000")
        user = self.find_user(response.username, client_host)
        plugin = response.auth_plugin or auth.NATIVE_PASSWORD
        data = response.auth_response
        used_password = "YES" if data else "NO"
        if user is None:
            raise self._denied(response.username, client_host, used_password)
        if plugin not in (auth.NATIVE_PASSWORD, auth.CACHING_SHA2_PASSWORD) or (
            plugin != user.auth_plugin and user.auth_plugin == auth.CLEAR_PASSWORD
        ):
            # switch the client to the plugin this user is configured for
            await self._switch_and_check(wire, user, user.auth_plugin, client_host)
        elif plugin == auth.CACHING_SHA2_PASSWORD:
            await self._caching_sha2(wire, user, scramble, data, client_host, used_password, secure=secure)
        elif not self.check(user, plugin, scramble, data):
            raise self._denied(user.user, client_host, used_password)
        return AuthenticatedClient(user, response, caps, secure)

    async def _switch_and_check(self, wire: ClientPackets, user: UserConfig, plugin: str, client_host: str,
                                *, secure: bool = False) -> None:
        """AuthSwitchRequest to `plugin` with a fresh scramble, then check the answer."""
        scramble = auth.new_scramble()
        wire.send(AuthSwitchRequest(plugin, scramble).encode())
        await wire.flush()
        data = await wire.read(HANDSHAKE_TIMEOUT)
        used = "YES" if data and data != b"\x00" else "NO"
        if plugin == auth.CACHING_SHA2_PASSWORD:
            await self._caching_sha2(wire, user, scramble, data, client_host, used, secure=secure)
        elif not self.check(user, plugin, scramble, data):
            raise self._denied(user.user, client_host, used)

    async def _caching_sha2(
        self, wire: ClientPackets, user: UserConfig, scramble: bytes, data: bytes, host: str, used: str,
        *, secure: bool = False,
    ) -> None:
        if not user.password:
            if data in (b"", b"\x00"):
                return
            raise self._denied(user.user, host, used)
        key = (user.user, user.host)
        if key in self._sha2_cache:
            if not auth.check_caching_sha2(user.password, scramble, data):
                raise self._denied(user.user, host, used)
            wire.send(AuthMoreData(auth.FAST_AUTH_SUCCESS).encode())
            return
        if not auth.check_caching_sha2(user.password, scramble, data):
            raise self._denied(user.user, host, used)
        # first login since start-up: full authentication, as MySQL does with an empty cache
        wire.send(AuthMoreData(auth.PERFORM_FULL_AUTHENTICATION).encode())
        await wire.flush()
        answer = await wire.read(HANDSHAKE_TIMEOUT)
        if answer == auth.REQUEST_PUBLIC_KEY:
            wire.send(AuthMoreData(self.rsa.public_pem).encode())
            await wire.flush()
            encrypted = await wire.read(HANDSHAKE_TIMEOUT)
            try:
                password = self.rsa.decrypt_password(encrypted, scramble)
            except ValueError as exc:
                raise self._denied(user.user, host, used) from exc
        elif secure:
            # over TLS the client sends the password in clear, as to MySQL
            password = answer.rstrip(b"\x00").decode("utf-8", errors="replace")
        else:
            # over plain TCP only an RSA-encrypted password is taken (a client that already has the public
            # key sends it at once); a password in clear would have crossed the network readable
            try:
                password = self.rsa.decrypt_password(answer, scramble)
            except ValueError as exc:
                denied = self._denied(user.user, host, used)
                denied.message += ("; caching_sha2_password sends the password in clear at a first login, which "
                                   "the proxy takes over TLS only: connect with TLS, or let the client fetch "
                                   "the RSA public key (e.g. get-server-public-key)")
                raise denied from exc
        if password != user.password:
            raise self._denied(user.user, host, used)
        self._sha2_cache.add(key)

    async def change_user(self, wire: ClientPackets, request: ComChangeUser, client_host: str, *,
                          secure: bool = False) -> UserConfig:
        """Authenticate COM_CHANGE_USER: the client is switched to its user's plugin with a fresh scramble
        (the answer it sent was made with the old one), then checked like a new login."""
        user = self.find_user(request.username, client_host)
        if user is None:
            raise self._denied(request.username, client_host, "YES" if request.auth_response else "NO")
        plugin = user.auth_plugin if user.auth_plugin != auth.CLEAR_PASSWORD else auth.NATIVE_PASSWORD
        await self._switch_and_check(wire, user, plugin, client_host, secure=secure)
        return user

    @staticmethod
    def _denied(user: str, host: str, used_password: str) -> HandshakeFailed:
        return HandshakeFailed(
            ErrorCode.ACCESS_DENIED_ERROR,
            f"Access denied for user '{user}'@'{host}' (using password: {used_password})",
            "28000", user,
        )
