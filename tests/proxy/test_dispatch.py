"""proxy.session.dispatch without servers: the tables (command -> handler, proxy statement kind -> handler)
and a real `Session` answering through them over an in-memory fake socket.

The fake socket only collects the bytes the session writes (it stands for the client's TCP connection,
not for MySQL); the answers are decoded with protocol/'s own codec. Commands that need a backend are
covered by the integration tests on real MariaDB.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from protocol.constants import Capability, Command, ErrorCode, SetOption
from protocol.errors import ServerError
from protocol.framing import FrameDecoder
from protocol.packets import ComInitDB, ComProcessKill, ComQuery, ComSetOption, ERRPacket
from proxy.privilege import Privilege
from proxy.session import commands, dispatch, prepared
from proxy.session.session import Session
from proxy.session.statements import KINDS, classify

# --- the tables -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "handler"), [
    (Command.QUERY, dispatch._query),
    (Command.PING, dispatch._ping),
    (Command.INIT_DB, dispatch._init_db),
    (Command.FIELD_LIST, commands.field_list),
    (Command.SET_OPTION, dispatch._set_option),
    (Command.RESET_CONNECTION, dispatch._reset_connection),
    (Command.STATISTICS, dispatch._statistics),
    (Command.PROCESS_KILL, dispatch._process_kill),
    (Command.CHANGE_USER, dispatch._change_user),
    (Command.STMT_PREPARE, prepared.prepare),
    (Command.STMT_EXECUTE, dispatch._stmt_execute),
    (Command.STMT_RESET, prepared.reset),
    (Command.STMT_FETCH, prepared.fetch),
])  # fmt: skip
def test_each_command_has_its_handler(command: Command, handler: Any) -> None:
    assert dispatch.COMMANDS[command] is handler


@pytest.mark.parametrize("command", [Command.STMT_SEND_LONG_DATA, Command.STMT_CLOSE])
def test_commands_without_an_answer_are_wrapped(command: Command) -> None:
    assert dispatch.COMMANDS[command].__qualname__.startswith("_unanswered")


@pytest.mark.parametrize("command", [
    Command.SLEEP, Command.CREATE_DB, Command.DROP_DB, Command.REFRESH, Command.SHUTDOWN, Command.PROCESS_INFO,
    Command.CONNECT, Command.DEBUG, Command.TIME, Command.DELAYED_INSERT, Command.BINLOG_DUMP,
    Command.TABLE_DUMP, Command.CONNECT_OUT, Command.REGISTER_SLAVE, Command.DAEMON, Command.BINLOG_DUMP_GTID,
])  # fmt: skip
def test_commands_the_proxy_does_not_serve_have_no_handler(command: Command) -> None:
    assert command not in dispatch.COMMANDS


def test_every_proxy_statement_kind_has_a_handler() -> None:
    assert set(dispatch.PROXY_STATEMENTS) == KINDS


@pytest.mark.parametrize(("sql", "kind", "handler"), [
    ("USE sharding_db", "use", dispatch._use),
    ("SHOW DATABASES LIKE 'a%'", "show_databases", dispatch._show_databases),
    ("SELECT DATABASE()", "select_database", dispatch._select_database),
    ("SHOW FULL PROCESSLIST", "processlist", dispatch._processlist),
    ("KILL QUERY 7", "kill", dispatch._kill),
    ("KILL USER app", "kill_other", dispatch._kill_other),
    ("PREVIEW SELECT 1", "preview", dispatch.admin.admin_statement),
    ("SHOW SHARDING TABLE RULES", "show_rules", dispatch.admin.admin_statement),
    ("SHOW SHARDING TABLE NODES", "show_nodes", dispatch.admin.admin_statement),
    ("SHOW STORAGE UNITS", "units", dispatch.admin.admin_statement),
    ("SHOW READWRITE_SPLITTING RULES", "show_rw_rules", dispatch.admin.admin_statement),
    ("SHOW TRANSACTION RULE", "show_txn_rule", dispatch.admin.admin_statement),
    ("SHOW DIST VARIABLES", "distsql", dispatch._distsql),
])  # fmt: skip
def test_a_statement_goes_to_the_handler_of_its_kind(sql: str, kind: str, handler: Any) -> None:
    stmt = classify(sql)
    assert stmt is not None and stmt.kind == kind
    assert dispatch.PROXY_STATEMENTS[kind] is handler


# --- a session answering over an in-memory socket -----------------------------------------------------------


class FakeTransport:
    """The client's socket: keeps what is written."""

    def __init__(self) -> None:
        self.sent = bytearray()

    def write(self, data: bytes) -> None:
        self.sent += data

    def get_protocol(self) -> None:
        return None

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


class FakeWriter:
    def __init__(self) -> None:
        self.transport = FakeTransport()

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else None

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass


def fake_server() -> Any:
    return SimpleNamespace(
        max_packet=1 << 24, statement_timeout=0.0, sessions={}, databases_by_name={}, server_version="5.7.99",
        config=SimpleNamespace(privilege=Privilege()), database=lambda name: None, default_database=lambda: None,
        started_at=0.0, questions=0,
    )


def answer(command: bytes, setup: Any = None) -> tuple[Session, list[bytes]]:
    """Dispatch one command on a fresh session; the payloads it wrote."""

    async def run() -> tuple[Session, list[bytes]]:
        writer = FakeWriter()
        session = Session(fake_server(), asyncio.StreamReader(), writer, 1)  # type: ignore[arg-type]
        session.capabilities = Capability.PROTOCOL_41 | Capability.SECURE_CONNECTION
        if setup is not None:
            setup(session)
        await session._dispatch(command)
        frames = FrameDecoder()
        frames.feed(bytes(writer.transport.sent))
        return session, [payload for _first, _last, payload in frames.packets()]

    return asyncio.run(run())


def err(payload: bytes) -> tuple[int, str]:
    assert payload[:1] == b"\xff", payload
    e = ERRPacket.decode(payload)
    return e.errno, e.sqlstate


@pytest.mark.parametrize(("command", "expected"), [
    (bytes([Command.DEBUG]), (ErrorCode.UNKNOWN_COM_ERROR, "08S01")),
    (bytes([Command.BINLOG_DUMP]), (ErrorCode.UNKNOWN_COM_ERROR, "08S01")),
    (ComSetOption(5).encode(), (ErrorCode.UNKNOWN_COM_ERROR, "08S01")),  # not an option MySQL has
    (bytes([Command.PROCESS_KILL]), (ErrorCode.MALFORMED_PACKET, "HY000")),  # no connection id
    (ComProcessKill(99).encode(), (ErrorCode.NO_SUCH_THREAD, "HY000")),
    (ComQuery(b"KILL 99").encode(), (ErrorCode.NO_SUCH_THREAD, "HY000")),
    (ComQuery(b"KILL USER app").encode(), (ErrorCode.NOT_SUPPORTED_YET, "42000")),
    (ComInitDB("nosuch").encode(), (ErrorCode.BAD_DB_ERROR, "42000")),
    (ComQuery(b"USE nosuch").encode(), (ErrorCode.BAD_DB_ERROR, "42000")),
    (ComQuery(b"SELECT * FROM t").encode(), (1046, "3D000")),  # no database selected
])  # fmt: skip
def test_refusals_are_mysql_errors(command: bytes, expected: tuple[int, str]) -> None:
    session, out = answer(command)
    assert len(out) == 1 and err(out[0]) == expected
    assert session.errored and session.last_errno == expected[0]


@pytest.mark.parametrize(("command", "first_byte"), [
    (bytes([Command.PING]), 0x00),
    (ComSetOption(SetOption.MULTI_STATEMENTS_OFF).encode(), 0xFE),  # EOF, as servers answer it
])  # fmt: skip
def test_simple_commands_answer_ok(command: bytes, first_byte: int) -> None:
    session, out = answer(command)
    assert [p[0] for p in out] == [first_byte] and not session.errored


def test_set_option_changes_the_sessions_multi_statements() -> None:
    session, _out = answer(ComSetOption(SetOption.MULTI_STATEMENTS_OFF).encode())
    assert session.multi_statements is False


@pytest.mark.parametrize("command", [bytes([Command.STMT_CLOSE, 9, 0, 0, 0]), bytes([Command.STMT_CLOSE])])
def test_commands_without_an_answer_answer_nothing_even_when_they_fail(command: bytes) -> None:
    _session, out = answer(command)
    assert out == []


def test_the_proxy_answers_select_database_itself() -> None:
    _session, out = answer(ComQuery(b"SELECT DATABASE()").encode())
    assert out[0] == b"\x01" and out[-1][0] == 0xFE  # one column ... EOF
    assert b"\xfb" in out  # the row: NULL (no database chosen)


def test_show_databases_lists_the_visible_ones() -> None:
    def setup(session: Session) -> None:
        session.server.databases_by_name = {"b_db": object(), "a_db": object()}

    _session, out = answer(ComQuery(b"SHOW DATABASES").encode(), setup)
    rows = [p for p in out if p[:1] not in (b"\x01", b"\x03", b"\xfe")]
    assert rows == [b"\x04a_db", b"\x04b_db"]


@pytest.mark.parametrize(("raised", "expected"), [
    (ServerError("no", errno=1235, sqlstate="42000"), (1235, "42000")),
    (RuntimeError("a bug"), (ErrorCode.UNKNOWN_ERROR, "HY000")),
])  # fmt: skip
def test_what_a_handler_raises_becomes_the_commands_err(monkeypatch: pytest.MonkeyPatch, raised: Exception,
                                                         expected: tuple[int, str]) -> None:
    async def handler(session: Any, payload: bytes) -> None:
        raise raised

    monkeypatch.setitem(dispatch.COMMANDS, Command.PING, handler)  # type: ignore[index]
    _session, out = answer(bytes([Command.PING]))
    assert len(out) == 1 and err(out[0]) == expected
