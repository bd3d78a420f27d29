"""One memo for the pages' per-session results (decodes, embeddings, views, draws)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

import streamlit as st

__all__ = ["memo"]

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
