"""The data sources behind the proxy: `backend` (DataSource, BackendConnection, relaying a backend's
answer), `pool` (the lease state machine: the single owner of every connection), `codec` (text and binary
statement encodings), `readwrite` (read/write splitting groups and their health), `runtime` (a logical
database: kernel, data sources, metadata), `xa` / `xalog` (the XA transaction manager and its log)."""
