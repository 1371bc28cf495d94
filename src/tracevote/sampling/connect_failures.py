"""Why no connection was made: the cause a failed connect is counted by, in words, and what to check for each.

>>> connect_failure_cause(requests.exceptions.SSLError("bad handshake"))
'TLS error'
"""

from __future__ import annotations

import ssl

import requests
import urllib3

UNREACHABLE_HINTS = {
    "connection refused": "is the server running, on that host and port?",
    "name not resolved": "is the host name spelled right, and is there a network?",
    "connect timeout": "a wrong host, a firewall, or no network?",
    "TLS error": "https to a plain-http port, or a proxy with its own certificate?",
    "cannot connect": "is there a route to that host?",
}


def connect_failure_cause(exc: requests.ConnectionError) -> str | None:
    """"connection refused" | "name not resolved" | "TLS error" | "cannot connect" when no connection was
    made; None when one was made and then dropped."""
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS error"
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        return "name not resolved"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        refused = isinstance(reason.__cause__, ConnectionRefusedError) or "refused" in str(reason).lower()
        return "connection refused" if refused else "cannot connect"
    if isinstance(reason, ssl.SSLError):
        return "TLS error"
    return None


def innermost_reason(exc: Exception) -> str:
    """The wrapped urllib3 reason's own words, without requests' "Max retries exceeded" wrapping."""
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return " ".join(str(reason or exc).split())[:200]
