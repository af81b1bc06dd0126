"""Running a routed statement: `routed` (route, then run; EXPLAIN), `executor` (units, relaying, merging),
`readers`, `units` (shared helpers, error renaming), `into`, `upsert`, `setquery`, `txn` / `txn_control`
(transactions across data sources), `locks`, `replicas` (a session's read/write splitting), `fastpath`
(single-connection commands answered in the socket callbacks). Takes the session as `context.SessionContext`
(a Protocol) with its plain-data state (`state`); never imports proxy.session."""
