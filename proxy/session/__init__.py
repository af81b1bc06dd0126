"""One client's session: `session.Session` holds its state and lifecycle; `dispatch` maps each command and
each proxy statement kind to one handler (`query`, `commands`, `prepared`, `metadata`, `processlist`,
`admin`, `distsql/`); `connections` and `stopping` are the Session's mixins for holding connections and for
stopping a statement. Handlers name the session through `handle.SessionHandle`, never the class."""
