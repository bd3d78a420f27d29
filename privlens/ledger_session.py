"""This session's release ledger, kept on the server for the browser that holds its token.

The first run of a session reads the browser's ledger cookie (``st.context.cookies``: sent with the
page's connection, never in the URL, so a shared link carries no ledger). A known token restores its
ledger from disk (:class:`privlens.ledger_store.LedgerStore`); without one a fresh token is made
server-side (:func:`privlens.ledger_store.new_token`) and :func:`hand_token` has the browser store
it (a ``SameSite=Strict`` cookie set by a script in the page: no request leaves the page, nothing
external is loaded). A reload or a new connection after a server restart sends the cookie back.

:func:`record` writes the new row to disk (atomic, fsync'd) before it returns, and only then to the
session: a page shows a release only after its charge is durable (:func:`privlens.sending.send`).
When the disk cannot be written, :class:`NotRecorded` is raised and the draw is discarded unseen.
Whenever a ledger starts empty, or can be kept in memory only, :func:`status` says so in plain words
(the Accountant page shows it; a toast on any page for the warnings).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import streamlit as st

from privlens.ledger_store import (
    LedgerRefused,
    LedgerStore,
    LedgerUnavailable,
    merge,
    new_row,
    new_token,
    valid_token,
)

__all__ = ["LEDGER_KEY", "NotRecorded", "add", "clear", "hand_token", "record", "rows", "status"]

LOG = logging.getLogger("privlens")
LEDGER_KEY = "privlens_ledger"
STATE_KEY = "privlens_ledger_state"
#: how long the browser keeps its token (400 days, the longest a browser honours); renewed each visit
COOKIE_SECONDS = 400 * 24 * 3600
WARNINGS = ("unknown", "refused", "unavailable")


class NotRecorded(Exception):
    """The release could not be written to the ledger on disk: it must not be shown."""


@dataclass
class _State:
    store: LedgerStore | None
    token: str | None
    status: str  # restored, new, unknown, refused, unavailable
    detail: str = ""
    restored: int = 0
    seen: tuple[int, int, int] | None = None
    toasted: bool = False


def _cookies() -> Mapping[str, str]:
    """The cookies the browser sent with this session's connection."""
    return st.context.cookies


def _state() -> _State:
    state = st.session_state.get(STATE_KEY)
    if not isinstance(state, _State):
        state = _start(st.session_state.setdefault(LEDGER_KEY, []))
        st.session_state[STATE_KEY] = state
    return state


def _start(held: list[dict[str, Any]]) -> _State:
    """Open the browser's ledger (module docstring) into ``held``, the session's rows."""
    try:
        store = LedgerStore()
    except LedgerUnavailable as exc:
        LOG.warning("ledgers are kept in memory only: %s", exc)
        return _State(None, None, "unavailable", str(exc))
    cookie = _cookies().get(store.cookie_name())
    if not valid_token(cookie):
        return _State(store, new_token(), "new")
    token = str(cookie)
    try:
        loaded = store.load(token)
    except LedgerRefused as exc:
        LOG.warning("a ledger file was refused and set aside: %s", exc)
        return _State(store, token, "refused", str(exc))
    except OSError as exc:
        return _State(None, None, "unavailable", f"it cannot be read ({exc.strerror})")
    if loaded is None:
        return _State(store, token, "unknown")
    held[:] = merge(loaded, held)[0]
    return _State(store, token, "restored", restored=len(loaded), seen=store.signature(token))


def rows() -> list[dict[str, Any]]:
    """The session's rows (the list kept in ``st.session_state``), first brought up to date with the
    file when another session of the same browser (a second tab) changed it."""
    state = _state()
    held: list[dict[str, Any]] = st.session_state.setdefault(LEDGER_KEY, [])
    for row in held:  # a row kept by an older version of this session has no id yet
        if "id" not in row:
            row.update(id=secrets.token_hex(16), at=row.get("at") or "unknown")
    if state.store is None or state.token is None:
        return held
    sig = state.store.signature(state.token)
    if sig == state.seen:
        return held
    try:
        if sig is None:  # removed on the server meanwhile: what this session holds is saved again
            if held:
                state.store.save(state.token, held)
        else:
            held[:] = state.store.load(state.token) or []
    except LedgerRefused as exc:
        state.status, state.detail = "refused", str(exc)
        LOG.warning("a ledger file was refused and set aside: %s", exc)
        _save_quietly(state, held)
    except OSError as exc:
        LOG.warning("the ledger file could not be read: %s", exc)
        return held
    state.seen = state.store.signature(state.token)
    return held


def _save_quietly(state: _State, held: list[dict[str, Any]]) -> None:
    if state.store is not None and state.token is not None and held:
        try:
            state.store.save(state.token, held)
        except OSError as exc:
            LOG.warning("the ledger could not be saved again: %s", exc)


def _update(change: Any) -> Any:
    """Apply ``change(rows) -> (new rows, result)`` to the file (under its lock) and then to the
    session; NotRecorded when the file cannot be written (the session is then unchanged)."""
    held = rows()
    state = _state()
    if state.store is None or state.token is None:
        new, result = change(list(held))
        held[:] = new
        return result
    try:
        with state.store.locked():
            try:
                disk = state.store.load(state.token) or []
            except LedgerRefused as exc:
                state.status, state.detail, disk = "refused", str(exc), []
            new, result = change(merge(disk, held)[0])
            state.store.save(state.token, new)
            state.seen = state.store.signature(state.token)
    except OSError as exc:
        LOG.error("the ledger could not be written: %s", exc)
        raise NotRecorded(f"the ledger could not be written on the server ({exc.strerror or exc})") from None
    held[:] = new
    return result


def record(*, image: str, image_key: str, label: str, guarantee: Any) -> None:
    """Charge one release: on disk (atomic, synced) first, then in the session; NotRecorded if the
    disk write fails."""
    row = new_row(image=image, image_key=image_key, label=label, guarantee=guarantee)
    _update(lambda current: ([*current, row], None))


def add(incoming: list[dict[str, Any]]) -> int:
    """Add the rows of an imported ledger this one lacks (:func:`privlens.ledger_store.merge`: nothing
    is removed); how many were added. NotRecorded as :func:`record`."""
    return int(_update(lambda current: merge(current, incoming)))


def clear() -> None:
    """Empty the ledger, on disk too (the user's explicit choice). NotRecorded as :func:`record`."""
    _update(lambda current: ([], None))


def status() -> tuple[str, str]:
    """(kind, text): ``info`` or ``warning``, and in plain words where this session's ledger came
    from and whether it survives a reload."""
    state = _state()
    kept = "kept on this server for this browser, across reloads and server restarts"
    again = "If you exported your earlier ledger, import it below so that its releases count again."
    if state.status == "restored":
        n = state.restored
        what = f"{n} release{'' if n == 1 else 's'} sent earlier from this browser"
        return "info", f"Your ledger was restored: {what} ({kept})."
    if state.status == "new":
        return "info", (
            "A new, empty ledger was started: this browser brought no ledger key (a first visit, a private "
            f"window, or cookies cleared). Releases you send are {kept}. {again}"
        )
    if state.status == "unknown":
        return "warning", (
            "**A new, empty ledger was started.** This browser's ledger key is unknown to this server (its "
            "ledger was removed, or kept by another server), so releases you sent before are not counted "
            f"here. {again}"
        )
    if state.status == "refused":
        return "warning", (
            f"**Your saved ledger was refused and not used:** {state.detail}. It was set aside on the server "
            "and a new ledger was started, so the totals here leave out the releases it held. "
            f"{again}"
        )
    return "warning", (
        f"**Your ledger is kept for this browser session only:** it cannot be stored on this server "
        f"({state.detail}). A reload or a server restart empties it; download it (JSON) before you leave."
    )


def hand_token() -> None:
    """Have the browser keep this session's token (a cookie, renewed on every visit), and say once
    per session, in a toast, when the ledger started empty against expectations or cannot be kept."""
    state = _state()
    if state.status in WARNINGS and not state.toasted:
        state.toasted = True
        st.toast("Your privacy ledger started empty or is not saved: see the Accountant page.",
                 icon=":material/warning:")
    if state.store is None or state.token is None:
        return
    name, token = state.store.cookie_name(), state.token  # both [A-Za-z0-9_-]: nothing to escape
    st.sidebar.html(
        "<script>document.cookie = '" + f"{name}={token}; Path=/; Max-Age={COOKIE_SECONDS}; SameSite=Strict"
        "' + (location.protocol === 'https:' ? '; Secure' : '');</script>",
        unsafe_allow_javascript=True,
    )
