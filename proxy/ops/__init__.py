"""Running the proxy in production: readiness, the SIGTERM drain, the SIGHUP reload and the status page.

Apart from proxy.server so that the statement path never imports them: they read the server's state from
outside (its sessions, pools, databases) on the proxy's own loop, and change it only through the code
DistSQL uses.
"""
