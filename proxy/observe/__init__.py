"""Seeing inside the running proxy: query digests, the slow-query log, the audit log (issue 37)."""
