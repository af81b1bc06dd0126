"""The XA decision log (proxy.backends.xalog) and the transaction rule's configuration and RAL parsing."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from proxy.backends import xalog
from proxy.backends.xa import FORMAT_ID, bqual_for, parse_recover, rule_from_statement, xid_sql
from proxy.backends.xalog import Branch, CommitRecord, DecisionLog, LogUnavailable, decode_line, encode_commit
from proxy.config import load_config
from proxy.session.admin import RuleSyntaxError, parse_transaction_rule
from proxy.session.statements import classify
from routing.errors import ConfigError


def _record(gtrid: str) -> CommitRecord:
    return CommitRecord(gtrid, (Branch("ds_0", "127.0.0.1:3306", "ds_0"), Branch("ds_1", "10.0.0.2:3307", "ds_1")),
                        1700000000.5)


def test_a_record_round_trips_and_a_torn_or_damaged_one_is_refused() -> None:
    line = encode_commit(_record("sp-abc-1-7"))
    assert line.endswith(b"\n")
    assert decode_line(line) == ("C", "sp-abc-1-7", _record("sp-abc-1-7"))
    assert decode_line(line[:-10]) is None  # torn by a crash mid-write
    assert decode_line(line.replace(b"ds_1", b"ds_2")) is None  # damaged: the CRC does not match
    assert decode_line(b"garbage\n") is None


def test_decisions_survive_a_restart_and_done_ones_are_compacted_away(tmp_path: Path) -> None:
    async def run() -> None:
        log = DecisionLog(tmp_path)
        log.open()
        assert log.boot == 1 and len(log.instance_id) == 12
        for n in range(1, 4):
            await log.log_commit(_record(f"sp-{log.instance_id}-1-{n}"))
        assert set(log.committed) == {f"sp-{log.instance_id}-1-{n}" for n in (1, 2, 3)} and not log.pending
        log.forget(f"sp-{log.instance_id}-1-2")
        await asyncio.sleep(0.05)  # the D record is written lazily
        log.close()

    asyncio.run(run())
    text = (tmp_path / "decisions.log").read_bytes()
    assert text.count(b"\nD ") + text.startswith(b"D ") == 1
    again = DecisionLog(tmp_path)
    again.open()
    try:
        assert again.boot == 2  # the boot counter keeps xids of different runs apart
        assert sorted(again.committed) == [f"sp-{again.instance_id}-1-1", f"sp-{again.instance_id}-1-3"]
        # compacted at open: only the undone decisions remain
        lines = (tmp_path / "decisions.log").read_bytes().splitlines()
        assert len(lines) == 2 and all(line.startswith(b"C ") for line in lines)
    finally:
        again.close()


def test_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    good = encode_commit(_record("sp-x-1-1"))
    torn = encode_commit(_record("sp-x-1-2"))[:-12]
    (tmp_path / "decisions.log").write_bytes(good + torn)
    log = DecisionLog(tmp_path, instance_id="x")
    log.open()
    try:
        assert list(log.committed) == ["sp-x-1-1"]
    finally:
        log.close()


def test_an_abort_record_voids_a_commit_record(tmp_path: Path) -> None:
    (tmp_path / "decisions.log").write_bytes(encode_commit(_record("sp-x-1-1")) + xalog._line("A sp-x-1-1"))
    log = DecisionLog(tmp_path, instance_id="x")
    log.open()
    try:
        assert log.committed == {}
    finally:
        log.close()


def test_concurrent_decisions_share_one_fsync(tmp_path: Path) -> None:
    async def run() -> int:
        log = DecisionLog(tmp_path)
        log.open()
        try:
            await asyncio.gather(*(log.log_commit(_record(f"sp-{log.instance_id}-1-{n}")) for n in range(50)))
            assert len(log.committed) == 50
            return log.writes
        finally:
            log.close()

    writes = asyncio.run(run())
    assert writes <= 3, writes  # group commit: the 50 waiters were batched


def test_the_log_compacts_when_it_grows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xalog, "COMPACT_BYTES", 4000)

    async def run() -> None:
        log = DecisionLog(tmp_path)
        log.open()
        try:
            for n in range(200):
                gtrid = f"sp-{log.instance_id}-1-{n}"
                await log.log_commit(_record(gtrid))
                if n != 7:
                    log.forget(gtrid)
            await asyncio.sleep(0.05)
            assert (tmp_path / "decisions.log").stat().st_size < 8000
        finally:
            log.close()

    asyncio.run(run())
    log = DecisionLog(tmp_path)
    log.open()
    try:
        assert list(log.committed) == [f"sp-{log.instance_id}-1-7"]
    finally:
        log.close()


def test_two_processes_cannot_share_a_log_directory(tmp_path: Path) -> None:
    first = DecisionLog(tmp_path)
    first.open()
    try:
        with pytest.raises(LogUnavailable, match="in use by another shardproxy process"):
            DecisionLog(tmp_path).open()  # flock is per open file description: a second open conflicts
    finally:
        first.close()
    second = DecisionLog(tmp_path)
    second.open()  # free again
    second.close()


def test_the_configured_instance_id_wins(tmp_path: Path) -> None:
    log = DecisionLog(tmp_path, instance_id="proxy_a")
    log.open()
    log.close()
    assert (tmp_path / "instance-id").read_text().strip() == "proxy_a"


def test_a_failed_write_voids_the_decision_and_stops_further_ones(tmp_path: Path) -> None:
    async def run() -> None:
        log = DecisionLog(tmp_path)
        log.open()
        try:
            os.close(log._fd)
            log._fd = os.open(os.devnull, os.O_RDONLY)  # writes now fail with EBADF
            with pytest.raises(LogUnavailable, match="could not be written"):
                await log.log_commit(_record("sp-y-1-1"))
            assert "sp-y-1-1" in log.aborted and "sp-y-1-1" not in log.committed and not log.pending
            with pytest.raises(LogUnavailable, match="earlier failure"):
                await log.log_commit(_record("sp-y-1-2"))
        finally:
            log.close()

    asyncio.run(run())


def test_xids_and_xa_recover_rows() -> None:
    assert bqual_for("ds_0") == "ds_0"
    odd = bqual_for("données 'x'")
    assert odd.startswith("b") and len(odd) <= 64 and "'" not in odd
    assert xid_sql("sp-a-1-2", "ds_0") == f"'sp-a-1-2','ds_0',{FORMAT_ID}"
    rows = [(FORMAT_ID, 8, 4, b"sp-a-1-2ds_0"), (1, 3, 0, b"\x00\xffA")]
    ours, foreign = parse_recover(rows)
    assert (ours.gtrid, ours.bqual, ours.sql) == (b"sp-a-1-2", b"ds_0", f"'sp-a-1-2','ds_0',{FORMAT_ID}")
    assert foreign.sql == "X'00ff41',X'',1"


# --- the transaction rule ----------------------------------------------------------------------------------


def _conf(tmp_path: Path, transaction: str) -> Path:
    (tmp_path / "global.yaml").write_text("authority:\n  users:\n  - {user: root@'%', password: root}\n"
                                          + transaction)
    (tmp_path / "database-x.yaml").write_text(  # a configuration serves at least one logical database
        "databaseName: x\ndataSources:\n  ds:\n    url: jdbc:mysql://127.0.0.1:3306/x\n    username: root\n")
    return tmp_path


def test_global_yaml_transaction_rule(tmp_path: Path) -> None:
    config = load_config(_conf(tmp_path, "transaction:\n  defaultType: xa\n  providerType: Narayana\n"
                                         "  props: {xa-recovery-interval-seconds: 2, recoveryStoreUrl: x}\n"))
    assert config.transaction.default_type == "XA" and config.transaction.provider_type == "Narayana"
    assert config.transaction.props["xa-recovery-interval-seconds"] == 2
    assert any("recoveryStoreUrl" in w for w in config.warnings)
    assert load_config(_conf(tmp_path, "")).transaction.default_type == "LOCAL"


@pytest.mark.parametrize("doc, key, text", [
    ("transaction: {defaultType: BASE}", "transaction.defaultType", "BASE (Seata) transactions are not supported"),
    ("transaction: {defaultType: TWOPC}", "transaction.defaultType", "unknown transaction type"),
    ("transaction: {defaultType: XA, props: {xa-recovery-interval-seconds: 0}}",
     "transaction.props.xa-recovery-interval-seconds", "positive"),
    ("transaction: {defaultType: XA, props: {xa-instance-id: 'a b'}}", "transaction.props.xa-instance-id",
     "letters"),
])
def test_bad_transaction_rules_stop_the_start_naming_file_and_key(tmp_path: Path, doc: str, key: str,
                                                                  text: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_conf(tmp_path, doc + "\n"))
    message = str(info.value)
    assert "global.yaml" in message and key in message and text in message, message


def test_alter_transaction_rule_grammar() -> None:
    assert parse_transaction_rule("(DEFAULT='XA', TYPE(NAME='Narayana'))") == ("XA", "Narayana", None)
    assert parse_transaction_rule('( DEFAULT = "LOCAL" )') == ("LOCAL", None, None)
    assert parse_transaction_rule(
        "(DEFAULT=XA, TYPE(NAME=Atomikos, PROPERTIES('xa-recovery-interval-seconds'=2, 'k'='v', 'b'=true)))"
    ) == ("XA", "Atomikos", {"xa-recovery-interval-seconds": 2, "k": "v", "b": True})
    for bad in ("", "(DEFAULT=)", "DEFAULT=XA", "(DEFAULT=XA, TYPE())", "(DEFAULT=XA) extra", "(DEFAULT='XA'"):
        with pytest.raises(RuleSyntaxError):
            parse_transaction_rule(bad)
    assert rule_from_statement("xa", "Narayana", None) == ("XA", "Narayana", None)
    with pytest.raises(ValueError, match="BASE"):
        rule_from_statement("BASE", None, None)
    with pytest.raises(ValueError, match="unsupported transaction type"):
        rule_from_statement("TCC", None, None)


def test_the_transaction_ral_is_the_proxys() -> None:
    assert classify("SHOW TRANSACTION RULE").kind == "show_txn_rule"  # type: ignore[union-attr]
    assert classify("show transaction in doubt;").kind == "show_in_doubt"  # type: ignore[union-attr]
    stmt = classify("ALTER TRANSACTION RULE (DEFAULT='XA', TYPE(NAME='Narayana'))")
    assert stmt is not None and stmt.kind == "alter_txn_rule" and stmt.arg == "(DEFAULT='XA', TYPE(NAME='Narayana'))"
    assert classify("ALTER TABLE t ADD COLUMN x INT") is None


def test_each_worker_process_has_a_log_and_an_instance_of_its_own(tmp_path: Path) -> None:
    from proxy.backends.xa import TransactionManager

    config = load_config(_conf(tmp_path, "transaction: {defaultType: XA, props: {xa-instance-id: px}}\n"))
    single = TransactionManager(config)
    assert single.log_dir() == tmp_path / "xa-log" and single._instance_prop() == "px"
    second = TransactionManager(config, worker=1, workers=3)
    assert second.log_dir() == tmp_path / "xa-log" / "worker-1" and second._instance_prop() == "pxw1"
    elsewhere = TransactionManager(load_config(_conf(tmp_path, "transaction: {props: {xa-log-dir: /var/x}}\n")))
    assert elsewhere.log_dir() == Path("/var/x") and not elsewhere.xa
