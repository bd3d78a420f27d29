"""The Accountant's ledger controls: where the ledger came from, export, import (add-only), clear.

An export is the ledger's rows as JSON (:func:`privlens.ledger_store.export_doc`: guarantees and
labels, no image, no token). An import is checked row by row and its guarantees parsed again
(:func:`privlens.ledger_store.parse_export`); after the user confirms, the releases the ledger lacks
are added, and nothing is ever removed: an import can only raise the totals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from privlens import ledger_session, ui
from privlens.ledger_store import export_doc, merge, parse_export
from privlens.settings import md_literal

__all__ = ["notice", "tools"]

DONE_KEY = "privlens_ledger_import_done"


def _count(n: int) -> str:
    return f"{n} release{'' if n == 1 else 's'}"


def notice() -> None:
    """Where this session's ledger came from and whether it survives a reload, in plain words."""
    kind, text = ledger_session.status()
    (st.warning if kind == "warning" else st.info)(text, icon=":material/receipt_long:")


def tools(rows: Sequence[dict[str, Any]]) -> None:
    """Download, clear and import, below the ledger's tables."""
    c1, c2 = st.columns(2)
    with c1:
        ui.download_json(
            "Download the ledger (JSON)",
            export_doc(rows),
            file_name="privacy-ledger.json",
            key="dl_ledger",
            disabled=not rows,
            help="Every release with its guarantee and label (no image, no key): keep it, or import it in "
            "another browser.",
        )
    if rows and c2.button(
        "Clear the ledger",
        key="clear_ledger",
        icon=":material/delete:",
        help="Removes every release from this browser's ledger, on the server too. The releases were sent: "
        "they still cost your images their privacy.",
    ):
        try:
            ledger_session.clear()
        except ledger_session.NotRecorded as exc:
            st.error(f"The ledger was not cleared: {exc}.")
        else:
            st.rerun()
    done = st.session_state.pop(DONE_KEY, None)
    if done:
        st.success(done, icon=":material/check:")
    upload = st.file_uploader(
        "Import a ledger (JSON, as downloaded here)",
        type=["json"],
        key="ledger_import",
        help="Adds the releases of an exported ledger that this one lacks; nothing is removed.",
    )
    if upload is None:
        return
    try:
        incoming = parse_export(upload.getvalue())
    except ValueError as exc:
        st.error(f"{md_literal(upload.name)} cannot be imported: {exc}. Nothing was changed.")
        return
    new = merge(rows, incoming)[1]
    if not new:
        st.info(f"Every release in {md_literal(upload.name)} is already in your ledger.")
        return
    st.warning(
        f"{md_literal(upload.name)} holds {_count(len(incoming))}; {_count(new)} not in your ledger yet. "
        "Importing adds them (nothing is removed), so your totals can only grow."
    )
    if st.button(f"Add {_count(new)} to my ledger", key="ledger_import_add", icon=":material/add:"):
        try:
            added = ledger_session.add(incoming)
        except ledger_session.NotRecorded as exc:
            st.error(f"Nothing was imported: {exc}.")
        else:
            st.session_state[DONE_KEY] = f"Imported {_count(added)} from {md_literal(upload.name)}."
            st.rerun()
