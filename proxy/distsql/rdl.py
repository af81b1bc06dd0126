"""RDL: changing rules at run time (not implemented yet: refused, naming the statement)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from proxy.distsql.errors import not_supported
from proxy.distsql.grammar import DistSQL

if TYPE_CHECKING:
    from proxy.session import Session


async def execute(session: Session, d: DistSQL) -> None:
    raise not_supported(d.kind.upper().replace("_", " "))
