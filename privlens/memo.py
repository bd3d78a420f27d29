"""The pages' memos: :func:`memo` per session (decodes, embeddings, views, draws), and
:func:`shared_memo` per server process, for values computed from public inputs only."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

import streamlit as st

from privcore._inflight import MISSING, InFlight

__all__ = ["memo", "shared_memo"]

T = TypeVar("T")


def memo(name: str, key: Hashable, compute: Callable[[], T], *, max_entries: int = 32) -> T:
    """``compute()`` once per ``key`` in this session, kept in ``st.session_state[name]`` (per user,
    never shared); beyond ``max_entries`` the oldest entry goes. The one memo of the pages' per-session
    results (decodes, embeddings, views, draws): a rerun for any other reason recomputes nothing."""
    store: dict = st.session_state.setdefault(name, {})
    if key not in store:
        value = compute()  # computed first: an exception stores nothing
        while len(store) >= max_entries:
            store.pop(next(iter(store)))
        store[key] = value
    return store[key]


@st.cache_resource(show_spinner=False)
def _shared() -> tuple[threading.Lock, OrderedDict, InFlight]:
    return threading.Lock(), OrderedDict(), InFlight()


def shared_memo(name: str, key: Hashable, compute: Callable[[], T], *, max_entries: int = 64) -> T:
    """``compute()`` once per ``(name, key)`` in this server process, for every session; beyond
    ``max_entries`` the least recently used entry goes. Only for values computed from public inputs (the
    shipped models and samples): a value of a user's upload goes in :func:`memo`, never here, so no
    session can see or time another's. A session that misses while another thread (a session or the
    warm-up) computes the same entry waits for it (``privcore._inflight``) instead of computing it beside
    it; a failed computation is not remembered."""
    lock, store, running = _shared()
    full = (name, key)

    def lookup() -> object:
        with lock:
            if full in store:
                store.move_to_end(full)
                return store[full]
        return MISSING

    def compute_and_store() -> T:
        value = compute()  # outside the lock: a long computation holds no other entry back
        with lock:
            value = store.setdefault(full, value)  # the first value stored stays
            store.move_to_end(full)
            while len(store) > max_entries:
                store.popitem(last=False)
        return value

    return running.run(full, lookup, compute_and_store)
