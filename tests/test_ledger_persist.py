"""The release ledger outlives its session: kept on disk under the browser's token (owner-only,
authenticated, written before a release is shown), restored in a new session with the same token,
refused and reported when tampered with, exported and imported (add-only)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from privcore.mechanisms import Guarantee
from privlens import ledger_session
from privlens.ledger_store import (
    LedgerRefused,
    LedgerStore,
    export_doc,
    merge,
    new_row,
    new_token,
    parse_export,
)
from tests._dashboard import ROOT, app, isolate, send, texts

PTR = {"mech": "PTR", "eps": "2.0"}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    isolate(monkeypatch, tmp_path_factory)
    directory = tmp_path / "ledgers"
    monkeypatch.setenv("PRIVLENS_LEDGER_DIR", str(directory))
    return directory


def _browser(monkeypatch: pytest.MonkeyPatch, token: str | None) -> None:
    """The cookies the next sessions' browser sends: the ledger token, or none."""
    cookies = {} if token is None else {LedgerStore().cookie_name(): token}
    monkeypatch.setattr(ledger_session, "_cookies", lambda: cookies)


def _token(at: AppTest) -> str:
    return at.session_state[ledger_session.STATE_KEY].token


def _rows(at: AppTest) -> list:
    return list(at.session_state["privlens_ledger"]) if "privlens_ledger" in at.session_state else []


def _accountant(at: AppTest) -> AppTest:
    at.switch_page(str(ROOT / "pages" / "accountant.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _guarantee(eps: float = 1.0) -> Guarantee:
    return Guarantee(epsilon=eps, delta=1e-5, radius=0.1, space="input", norm="l2")


# ------------------------------------------------------------------------------- the store


def test_files_are_private_named_by_hmac_and_authenticated(_env: Path) -> None:
    store, token = LedgerStore(), new_token()
    assert len(token) == 43 and store.load(token) is None  # 256 bits; unknown: no file
    rows = [new_row(image="a.png", image_key="abc", label="one", guarantee=_guarantee())]
    store.save(token, rows)
    path = store.path(token)
    assert stat.S_IMODE(os.stat(_env).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(_env / "ledger.secret").st_mode) == 0o600
    assert token not in path.name and token not in path.read_text()  # the name reveals nothing
    assert store.load(token) == rows
    other = new_token()  # a file copied under another browser's name is not that browser's ledger
    store.path(other).write_bytes(path.read_bytes())
    os.chmod(store.path(other), 0o600)
    with pytest.raises(LedgerRefused, match="authentication code"):
        store.load(other)
    assert not store.path(other).exists() and list(_env.glob("*.refused-*"))  # set aside, kept


@pytest.mark.parametrize("change", ["epsilon", "drop", "mode", "garbage"])
def test_a_tampered_file_is_refused(_env: Path, change: str) -> None:
    store, token = LedgerStore(), new_token()
    store.save(token, [new_row(image="a", image_key="k", label="l", guarantee=_guarantee(e)) for e in (1, 2)])
    path = store.path(token)
    doc = json.loads(path.read_text())
    if change == "epsilon":
        doc["releases"][1]["guarantee"]["epsilon"] = 0.01
    elif change == "drop":
        doc["releases"].pop()
    if change == "garbage":
        path.write_bytes(b"\x00not json")
    elif change != "mode":
        path.write_text(json.dumps(doc))
    os.chmod(path, 0o644 if change == "mode" else 0o600)
    with pytest.raises(LedgerRefused):
        store.load(token)
    assert store.load(token) is None  # moved aside: a fresh ledger from here, never the tampered one


def test_export_import_round_trip_checks_every_field() -> None:
    rows = [
        new_row(image="a.png", image_key="abc", label="PTR", guarantee=_guarantee(1.0)),
        new_row(image="b.png", image_key="def", label="all pairs", guarantee=Guarantee(
            epsilon=0.5, delta=0.0, radius=float("inf"), mechanism="x")),
    ]
    raw = json.dumps(export_doc(rows)).encode()
    assert "Infinity" not in raw.decode() and parse_export(raw) == rows
    doc = json.loads(raw)
    doc["releases"][0]["guarantee"]["epsilon"] = -1.0
    with pytest.raises(ValueError, match="release 1: its guarantee is not valid"):
        parse_export(json.dumps(doc).encode())
    with pytest.raises(ValueError, match="not a privlens ledger export"):
        parse_export(b'[{"epsilon": 1}]')
    changed = dict(rows[0], guarantee=_guarantee(3.0))  # same id, other content: added, never replaced
    merged, added = merge(rows, [changed, rows[1]])
    assert added == 1 and len(merged) == 3 and merged[:2] == rows and merged[2]["id"] != rows[0]["id"]


# ------------------------------------------------------------------------------- the dashboard


def test_a_new_session_with_the_same_token_sees_the_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    _browser(monkeypatch, None)
    at = send(send(app("release", query=PTR)))
    token, sent = _token(at), _rows(at)
    assert len(sent) == 2
    script = next(h.proto.body for h in at.get("html") if "document.cookie" in h.proto.body)
    assert f"{LedgerStore().cookie_name()}={token};" in script and "SameSite=Strict" in script
    assert "privlens_ledger" not in json.dumps(dict(at.query_params))  # never in the link
    _browser(monkeypatch, token)  # a reload, or a new connection after a server restart
    again = _accountant(app("accountant"))
    assert _rows(again) == sent
    assert "Your ledger was restored: 2 releases" in texts(again)
    assert list(again.dataframe[0].value["release"]) == [r["label"] for r in sent]
    at = send(app("release", query=PTR))
    assert len(_rows(at)) == 3 and "release #3" in _rows(at)[-1]["label"]  # numbering goes on


def test_a_tampered_ledger_is_refused_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    _browser(monkeypatch, None)
    at = send(app("release", query=PTR))
    token = _token(at)
    path = LedgerStore().path(token)
    doc = json.loads(path.read_text())
    doc["releases"][0]["guarantee"]["epsilon"] = 0.001  # spend less, says the file
    path.write_text(json.dumps(doc))
    _browser(monkeypatch, token)
    again = app(None)  # any page: a toast points to the Accountant
    assert any("see the Accountant page" in t.proto.body for t in again.get("toast"))
    _accountant(again)
    assert not _rows(again)
    warning = next(w.value for w in again.warning if "refused" in w.value)
    assert "authentication code does not match" in warning and "import it" in warning


def test_an_unknown_token_starts_a_new_ledger_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    _browser(monkeypatch, new_token())
    at = app("accountant")
    assert "A new, empty ledger was started." in texts(at) and "unknown to this server" in texts(at)
    _browser(monkeypatch, None)
    assert "this browser brought no ledger key" in texts(app("accountant"))


def test_the_charge_is_on_disk_before_the_release_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash between the charge and the display: the display step raises; the charge is kept."""
    _browser(monkeypatch, None)
    at = app("release", query=PTR)

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the server died while showing the release")

    monkeypatch.setattr("privlens.outcome.outcome_summary", crash)
    at.button(key="send").click().run()
    assert "failed" in texts(at)  # the page could not show it
    (row,) = LedgerStore().load(_token(at)) or []
    assert "(sent)" in row["label"] and row["guarantee"].epsilon == 2.0


def test_a_charge_that_cannot_be_written_shows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    _browser(monkeypatch, None)
    at = app("release", query=PTR)

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(LedgerStore, "save", full)
    at.button(key="send").click().run()
    assert not at.exception and not _rows(at)
    assert "could not be charged, so it was not sent" in texts(at) and "No space left" in texts(at)
    assert not [m for m in at.metric if m.label == "φ̂ = φ + Lap"]  # no outcome on screen


def test_export_then_import_in_another_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    _browser(monkeypatch, None)
    at = send(app("release", query=PTR))
    exported = json.dumps(export_doc(_rows(at))).encode()
    other = _accountant(app("release", query=PTR))  # another browser: its own, empty ledger
    assert not _rows(other)
    other.file_uploader(key="ledger_import").upload("privacy-ledger.json", exported, "application/json").run()
    assert "1 release not in your ledger yet" in texts(other) and not _rows(other)  # asks first
    other.button(key="ledger_import_add").click().run()
    assert [r["id"] for r in _rows(other)] == [r["id"] for r in _rows(at)]
    assert "Imported 1 release" in texts(other)
    assert LedgerStore().load(_token(other)) == _rows(other)  # on disk too
    other.run()
    assert "already in your ledger" in texts(other) and len(_rows(other)) == 1
    bad = json.loads(exported)
    bad["releases"][0]["guarantee"]["delta"] = 2.0
    other.file_uploader(key="ledger_import").upload("bad.json", json.dumps(bad).encode(), "application/json")
    other.run()
    assert "cannot be imported" in texts(other) and "Nothing was changed" in texts(other)
    assert len(_rows(other)) == 1


def test_two_tabs_of_one_browser_share_one_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    _browser(monkeypatch, None)
    first = send(app("release", query=PTR))
    _browser(monkeypatch, _token(first))
    second = send(app("release", query=PTR))  # another tab: the first tab's send, then its own
    assert len(_rows(second)) == 2
    first.run()
    assert [r["id"] for r in _rows(first)] == [r["id"] for r in _rows(second)]  # read again from disk
    send(first)
    assert len(LedgerStore().load(_token(first)) or []) == 3  # no send of either tab is lost
