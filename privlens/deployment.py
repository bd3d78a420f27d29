"""How the dashboard is deployed: ``PRIVLENS_DEPLOYMENT=shared`` (the default) or ``personal``.

* ``shared`` — a server other people may use (anything but one person on their own machine).
  Per-image results (φ and certificates, computed from a user's embedding) live only in that
  user's session: they are never read from or written to the on-disk Lipschitz cache, which all
  sessions of the server share, so no session can learn from timing or messages that another
  uploaded the same image. Model-level results (pattern tables, which depend only on the public
  model) still use the disk cache.
* ``personal`` — one user on their own device: per-image φ and certificates are also kept in the
  disk cache (:mod:`privcore.lipschitz.cache`: HMAC-keyed, owner-only, expiring), so a restart
  does not recertify.

In every mode the dashboard tells a user nothing about a cache hit their own session did not
create: a certification is reported the same way whether it was computed or read back, without
its duration.

Why ``shared`` is the default: the failure it prevents (one user learning that another uploaded
an image) is a privacy leak, while the cost of the safe choice is a recomputation of at most a
few seconds per image and session; a deployment that really is personal opts in with one
variable. Nothing here imports Streamlit.

:func:`custody_text` says, in the deployment's own terms, where the user's image is before anything
is sent; the Release and Inference-privacy pages both show it. "Nothing has left your device" is
said only where it is true: a ``personal`` deployment whose server listens on the loopback
interface alone, so the browser that uploaded the image runs on the machine that holds it. Anywhere
else the image was uploaded to a server, and the text says that the server holds it and that only
the release the user sends goes to the recipient.
"""

from __future__ import annotations

import ipaddress
import os

from privcore.validation import check_choice

__all__ = ["DEFAULT_DEPLOYMENT", "DEPLOYMENTS", "custody_text", "deployment", "image_cache", "loopback_only"]

#: the allowed values of ``$PRIVLENS_DEPLOYMENT``
DEPLOYMENTS = ("shared", "personal")
#: what an unset (or empty) ``$PRIVLENS_DEPLOYMENT`` means
DEFAULT_DEPLOYMENT = "shared"


def deployment() -> str:
    """``$PRIVLENS_DEPLOYMENT`` (read on every call), validated; :data:`DEFAULT_DEPLOYMENT` when
    unset. A ValueError names the variable, its value and the allowed ones."""
    raw = os.environ.get("PRIVLENS_DEPLOYMENT", "").strip().lower()
    return check_choice("PRIVLENS_DEPLOYMENT", raw or DEFAULT_DEPLOYMENT, DEPLOYMENTS)


def image_cache() -> bool | None:
    """The ``cache`` argument for per-image φ and certificates: True (the default disk cache) in a
    personal deployment, None (no disk cache) in a shared one."""
    return True if deployment() == "personal" else None


def loopback_only(address: str | None) -> bool:
    """Whether a server listening on ``address`` (Streamlit's ``server.address``) can be reached from
    its own machine only: ``localhost`` or a loopback IP. Unset or empty is False: Streamlit then
    listens on every interface."""
    text = (address or "").strip().strip("[]").lower()
    if text == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def custody_text(mode: str, *, address: str | None) -> str:
    """Where the user's image is before a release is sent, as Markdown for the Release and
    Inference-privacy pages. ``mode`` is :func:`deployment`'s value, ``address`` the server's listening
    address (:func:`loopback_only`). "Nothing has left your device" only for ``personal`` on loopback."""
    mode = check_choice("mode", mode, DEPLOYMENTS)
    tail = (
        "Only a release you send goes to the recipient, and its noise is drawn when you send: before "
        "that there is no release to see or to keep."
    )
    if mode == "personal" and loopback_only(address):
        return (
            ":material/lock: **Nothing has left your device.** This dashboard runs on your own machine "
            "(a personal deployment listening on localhost only): your image and everything computed "
            f"from it stay here. {tail}"
        )
    if mode == "personal":
        return (
            ":material/dns: **The server holds your image.** This personal deployment listens beyond "
            "localhost, so your image was uploaded to the machine that runs it, which keeps it for this "
            f"session and keeps its certified φ on disk for later sessions. {tail}"
        )
    return (
        ":material/dns: **The server holds your image for this session.** Your image was uploaded to "
        "this shared server, which keeps it, and what it computes from it, in your session only, out "
        f"of sight of other sessions. {tail}"
    )
