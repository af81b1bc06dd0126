"""A prepared EXECUTE's units sent with the parameter types the client bound (issue 34 item 4).

The binary codec binds each unit parameter with the type a client library would give its Python value
(`ParamType.of`: any int a BIGINT, any str a VAR_STRING). MariaDB types a column built from a parameter (`SELECT ? AS
p`, a recursive CTE anchored on `?`) by the type bound for it, so a client that bound a TINY UNSIGNED or a STRING
would see other column definitions through the proxy than from MariaDB. A unit whose parameters are the client's
own, in order (a statement routed to one unit, or run by federation on its host), is bound with the client's types;
any other unit (an IN list split by node, a LIMIT rewritten) as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.binary import ComStmtExecute, ParamType
from protocol.packets import ERRPacket
from proxy.backends.backend import BackendConnection
from proxy.backends.codec import BinaryCodec, StatementFailed
from routing.plan import ExecutionUnit


class BoundTypes(BinaryCodec):
    """The binary codec, binding the client's types to a unit that carries the client's parameters."""

    def __init__(self, values: Sequence[object], types: Sequence[ParamType]) -> None:
        self.values = tuple(values)
        self.types = tuple(types)

    def types_for(self, params: Sequence[object] | None) -> tuple[ParamType, ...]:
        """The client's types when `params` are the client's values in order (equal, of the same Python type: a
        type bound for a value holds any value equal to it); otherwise none (each inferred from its value)."""
        values = self.values
        if params is None or len(params) != len(values) or len(self.types) != len(values):
            return ()
        for a, b in zip(params, values, strict=True):
            if a is not b and (type(a) is not type(b) or a != b):
                return ()
        return self.types

    async def command(self, conn: BackendConnection, unit: ExecutionUnit) -> bytes:
        answer = await conn.prepared(unit.sql)
        if isinstance(answer, ERRPacket):
            raise StatementFailed(answer)
        params = tuple(unit.params or ())
        return ComStmtExecute(answer.ok.statement_id, 0, 1, params, self.types_for(params), True).encode()
