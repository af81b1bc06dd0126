"""The asyncio application: rooms that import one way (tests/proxy/test_import_graph.py checks it).

* top (composition and edges): `server` builds data sources and logical databases and runs one
  `Session` per client; `serve`, `cli`, `demo`, `metrics` (the Prometheus endpoint); `sandbox` (throwaway
  MariaDB servers for tests and the demo);
* `session/`: one client's state and the dispatcher (command -> handler, proxy statement kind -> handler),
  the handlers (COM_QUERY, prepared statements, metadata, admin and DistSQL, KILL), holding connections;
* `execution/`: running a routed statement (units, streaming, merging, the fast path, transactions, error
  renaming); names the session only through `execution.context`'s Protocols and `execution.state`'s data;
* `frontend/`: the client side of the wire (packets, handshake and authentication, TLS);
* `backends/`: data sources, the pools (the single owner of connections), read/write groups, XA;
* bottom: `config`, `privilege`, `rwconfig`, `logs`, `version`.
"""
