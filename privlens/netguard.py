"""The dashboard's server never looks up this machine's addresses on the network.

Streamlit's ``streamlit.net_util`` finds the machine's *internal* IP with a UDP connect to a public
resolver (8.8.8.8) and its *external* IP with an HTTP request to checkip.amazonaws.com. It calls them
when it prints its URLs (a server on every interface, e.g. ``HOST=0.0.0.0 make run``) and, under any
server address, when a WebSocket arrives from a foreign origin (its origin check; a failed lookup is
not remembered, so every such connection asks again). Either tells a third party that, and when,
someone runs privlens.

:func:`install` replaces both look-ups, and the HTTP helper behind the external one, by functions
that answer None without touching the network. Streamlit then prints the local URL only, and its
origin check still allows same-origin connections, localhost and ``browser.serverAddress``; only
the looked-up addresses are gone from its list. The launcher (``make run``, the ``privlens`` command)
installs it before the server starts.
"""

from __future__ import annotations

__all__ = ["install", "installed"]


def _no_address() -> str | None:
    """No address: the one answer that needs no request."""
    return None


def _no_request(url: str, timeout: float = 5) -> str | None:
    """No response: the request is never made."""
    return None


def install() -> None:
    """Make Streamlit's IP look-ups answer None, without a request (idempotent; before the server
    starts, so that the URLs it prints need none)."""
    from streamlit import net_util

    net_util.get_internal_ip = _no_address
    net_util.get_external_ip = _no_address
    net_util._make_blocking_http_get = _no_request


def installed() -> bool:
    """Whether :func:`install` is in force in this process."""
    from streamlit import net_util

    return (
        net_util.get_internal_ip is _no_address
        and net_util.get_external_ip is _no_address
        and net_util._make_blocking_http_get is _no_request
    )
