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
"""

from __future__ import annotations

import os

from privcore.validation import check_choice

__all__ = ["DEFAULT_DEPLOYMENT", "DEPLOYMENTS", "deployment", "image_cache"]

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
