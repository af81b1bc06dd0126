"""`SELECT ... INTO`: the clause found by tokens, so the rest of the statement routes as a plain SELECT.

MySQL allows the INTO clause after the select list, after FROM ... (before or after the locking clause)
or at the very end of a UNION. Its targets are user variables (``INTO @a, @b``), a file on the server
(``INTO OUTFILE 'f' [CHARACTER SET cs] [FIELDS ...] [LINES ...]``, ``INTO DUMPFILE 'f'``) or, inside
stored programs, local variables. The kernel routes the SELECT without the clause:

* user variables: the proxy runs the SELECT (merged when it spans several nodes), takes its one row and
  sets the variables for the session itself (``RoutedStatement.into_variables``): user variables live on
  backend connections, so the value must reach every connection the session uses, not only the one that
  happened to run the SELECT;
* a file: only where one node answers (the file is written by that node's server, as the user asked);
  over several nodes it is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from routing.parse import Token

_SELECT_STARTS = {"SELECT", "WITH", "(", "VALUES", "TABLE"}


@dataclass(frozen=True)
class IntoClause:
    start: int  # text offsets of the whole clause, from INTO to its last token (end exclusive)
    end: int
    kind: str  # "variables" | "outfile" | "dumpfile" | "other"
    variables: tuple[str, ...] = ()  # user variables as written (``@v``, ``@`a b```, ``@'x'``)
    trailing: bool = False  # after FROM: MariaDB warns (1287) that this position is deprecated


def find_into(tokens: list[Token]) -> IntoClause | None:
    """The top-level INTO clause of a SELECT statement (None when the statement is no SELECT or has none)."""
    if not tokens or tokens[0].upper not in _SELECT_STARTS:
        return None
    seen_from = False
    for i, tok in enumerate(tokens):
        if tok.depth == 0 and tok.kind == "w":
            if tok.upper == "INTO":
                return _clause(tokens, i, seen_from)
            seen_from = seen_from or tok.upper == "FROM"
    return None


def _clause(tokens: list[Token], i: int, trailing: bool) -> IntoClause:
    start = tokens[i].start
    j = i + 1
    if j < len(tokens) and tokens[j].kind == "w" and tokens[j].upper in ("OUTFILE", "DUMPFILE"):
        kind = tokens[j].upper.lower()
        j += 1
        # the file name, then (OUTFILE) CHARACTER SET / FIELDS / COLUMNS / LINES options, up to the clause
        # that may follow at top level (FROM, WHERE, ..., a locking clause) or the end
        stops = {"FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "FOR", "LOCK", "UNION", "WINDOW",
                 "INTERSECT", "EXCEPT", "PROCEDURE"}
        end = tokens[j - 1].end
        while j < len(tokens) and not (tokens[j].depth == 0 and tokens[j].upper in stops) and tokens[j].text != ";":
            end = tokens[j].end
            j += 1
        return IntoClause(start, end, kind, trailing=trailing)
    variables: list[str] = []
    end = tokens[i].end
    while j < len(tokens):
        tok = tokens[j]
        if tok.text != "@" or j + 1 >= len(tokens) or tokens[j + 1].start != tok.end:
            break
        name = tokens[j + 1]
        if name.kind not in ("w", "b", "s"):
            break
        variables.append(tok.text + name.text)
        end = name.end
        j += 2
        if j < len(tokens) and tokens[j].text == ",":
            j += 1
            continue
        break
    if not variables:  # local variables of a stored program, or something the proxy does not know
        return IntoClause(start, tokens[i].end, "other")
    return IntoClause(start, end, "variables", tuple(variables), trailing)


__all__ = ["IntoClause", "find_into"]
