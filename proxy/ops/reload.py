"""SIGHUP: read conf/ again and apply what changed, without dropping a session.

The directory is loaded exactly as at start (proxy.config.load_config): a file that would not start the
proxy changes nothing, and the error is logged (`config_reload_failed`). What changed is then applied by the
code that applies the same change made with DistSQL, so a reload and a statement behave alike:

* a logical database whose file changed (rules, storage units) or that is new: proxy.cluster.apply, which
  validates the document, opens the storage units it adds and swaps the rules in one step under the lock RDL
  takes (statements already routed finish on the old rules; the next statement of every session uses the
  new ones). A storage unit that cannot be reached leaves that database as it was (`config_reload_partial`);
* props that can change at run time (LIVE in proxy.config.props): as SET DIST VARIABLE sets them; a value
  set with SET DIST VARIABLE and not in the file goes back to the file's (or the default);
* the transaction rule: as ALTER TRANSACTION RULE;
* users and privileges: new logins use them; sessions already logged in stay (as MySQL's).

What only a restart can change is named in the log (`config_reload_needs_restart`): props read at start-up,
a logical database removed from conf/, `mode`. In Cluster mode the registry holds the configuration: a reload
is refused there (change it with DistSQL). With props.proxy-state-directory, the state directory's copy of a
database file (written by DistSQL) is what is read, as at start.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from proxy.config import load_config
from proxy.config.props import BY_KEY, LIVE, STARTUP

if TYPE_CHECKING:
    from proxy.config.model import ProxyConfig
    from proxy.ops.view import OpsServer as ProxyServer

log = structlog.get_logger("shardproxy.reload")


@dataclass
class Outcome:
    error: str = ""  # the configuration could not be loaded: nothing changed
    applied: list[str] = field(default_factory=list)
    needs_restart: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def audit_reload(server: ProxyServer, outcome: Outcome) -> None:
    """Call point for the audit log (issue 37, item 3: configuration reloads are audited events), which is
    another module's: it is called when the server has one (`server.audit`, a callable taking the event
    name and its fields)."""
    audit = getattr(server, "audit", None)
    if callable(audit):
        event = "config_reload_failed" if outcome.error else "config_reloaded"
        audit(
            event,
            error=outcome.error,
            applied=outcome.applied,
            needs_restart=outcome.needs_restart,
            failed=outcome.failed,
        )


async def reload(server: ProxyServer, conf_dir: Path) -> Outcome:
    if server.config.mode is not None:
        outcome = Outcome(
            error="in Cluster mode the registry holds the configuration: change it with DistSQL "
            "(SIGHUP does not read conf/)"
        )
        log.error("config_reload_failed", error=outcome.error, conf=str(conf_dir))
        audit_reload(server, outcome)
        return outcome
    try:
        new = await asyncio.to_thread(load_config, conf_dir)
    except Exception as exc:  # ConfigError, or a directory that went away: the running configuration stays
        outcome = Outcome(error=str(exc))
        log.error(
            "config_reload_failed",
            error=outcome.error,
            conf=str(conf_dir),
            hint="nothing was changed; fix the file and send SIGHUP again",
        )
        audit_reload(server, outcome)
        return outcome
    for warning in new.warnings:
        log.warning("config_warning", detail=warning)
    outcome = Outcome()
    await _databases(server, new, outcome)
    _props(server, new, outcome)
    _transaction(server, new, outcome)
    _authority(server, new, outcome)
    if outcome.needs_restart:
        log.warning("config_reload_needs_restart", what=outcome.needs_restart)
    if outcome.failed:
        log.error("config_reload_partial", failed=outcome.failed, applied=outcome.applied)
    log.info("config_reloaded", conf=str(conf_dir), applied=outcome.applied)
    audit_reload(server, outcome)
    return outcome


async def _databases(server: ProxyServer, new: ProxyConfig, outcome: Outcome) -> None:
    from proxy.cluster.apply import apply_database

    for name, config in new.databases.items():
        doc = dict(config.doc or {})
        running = server.database(name)
        if running is not None and dict(running.config.doc or {}) == doc:
            continue
        await apply_database(server, name, doc, config.file)
        now = server.database(name)
        if now is not None and dict(now.config.doc or {}) == doc:
            outcome.applied.append(f"database {name}: {'added' if running is None else 'changed'}")
        else:
            outcome.failed.append(f"database {name} (see the log line before)")
    wanted = {n.lower() for n in new.databases}
    for name in server.databases_by_name:
        if name.lower() not in wanted:
            outcome.needs_restart.append(f"database {name} removed from the configuration")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _props(server: ProxyServer, new: ProxyConfig, outcome: Outcome) -> None:
    from proxy.session.distsql import variables

    running = server.config.props
    for key in sorted(set(running) | set(new.props)):
        before, after = running.get(key), new.props.get(key)
        prop = BY_KEY.get(key)
        if prop is None or _text(before) == _text(after):
            continue
        if prop.use == STARTUP:
            if _text(before if after is None else after) == prop.default and None in (before, after):
                continue  # written out as its default, or no longer: the same value
            outcome.needs_restart.append(f"props.{key}")
            continue
        if prop.use != LIVE:
            if isinstance(running, dict):
                running[key] = after
            continue
        try:  # as SET DIST VARIABLE does it
            variable, value = variables.check_setting(server, key, _text(after) if after is not None else prop.default)
            variables.apply_setting(server, variable, value)
        except Exception as exc:
            outcome.failed.append(f"props.{key}: {getattr(exc, 'message', None) or exc}")
            continue
        if after is None and isinstance(running, dict):
            running.pop(key, None)  # back to the default, as the file says
        outcome.applied.append(f"props.{key}")


def _transaction(server: ProxyServer, new: ProxyConfig, outcome: Outcome) -> None:
    tm, rule = server.tm, new.transaction
    if (tm.default_type, tm.provider_type, dict(tm.props)) == (rule.default_type, rule.provider_type, dict(rule.props)):
        return
    try:  # as ALTER TRANSACTION RULE does it
        tm.alter(rule.default_type, rule.provider_type, dict(rule.props))
    except Exception as exc:
        outcome.failed.append(f"transaction rule: {exc}")
        return
    outcome.applied.append("transaction rule")


def _authority(server: ProxyServer, new: ProxyConfig, outcome: Outcome) -> None:
    if new.users == server.config.users and new.privilege == server.config.privilege:
        return
    server.authenticator.users = new.users
    server.config = replace(server.config, users=new.users, privilege=new.privilege)
    outcome.applied.append("authority (users, privileges)")


class Reloader:
    """Reloads one at a time: a SIGHUP during a reload runs one more after it (the file may have changed
    again meanwhile)."""

    def __init__(self, server: ProxyServer, conf_dir: Path) -> None:
        self.server = server
        self.conf_dir = conf_dir
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self.last: Outcome | None = None

    def request(self) -> None:
        log.info("config_reload_requested", conf=str(self.conf_dir))
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            self._again = False
            try:
                self.last = await reload(self.server, self.conf_dir)
            except Exception:  # a bug must not end the process: the next SIGHUP tries again
                log.exception("config_reload_failed", error="internal error")
            if not self._again:
                return

    async def wait(self) -> None:
        if self._task is not None and not self._task.done():
            await asyncio.wait((self._task,), timeout=30)


__all__ = ["Outcome", "Reloader", "audit_reload", "reload"]
