"""The client side of the wire: `wire` (whole packets in, framed packets out), `handshake` (the
greeting, authentication plugins, COM_CHANGE_USER), `tls` (the server certificate). Knows nothing of routing."""
