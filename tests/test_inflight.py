"""One computation per key across threads (privcore._inflight): a caller waits for another caller's
computation of the same key, but never for a background thread's (a priority inversion on a loaded
machine); the first value stored is the one every caller gets."""

from __future__ import annotations

import threading

from privcore._inflight import Memo, is_background, mark_background


def _in_thread(target, *, background: bool) -> threading.Thread:
    def run() -> None:
        if background:
            mark_background()
        target()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_foreground_caller_computes_beside_a_background_one_and_the_first_value_stays() -> None:
    memo = Memo(4)
    started, release = threading.Event(), threading.Event()
    got: dict[str, object] = {}

    def slow() -> str:
        started.set()
        assert release.wait(30)
        return "background"

    worker = _in_thread(lambda: got.setdefault("background", memo.get("k", slow)), background=True)
    assert started.wait(30)
    assert memo.get("k", lambda: "foreground") == "foreground"  # did not wait for the blocked thread
    release.set()
    worker.join(30)
    assert got["background"] == "foreground"  # stored first: every caller gets the same value
    assert memo.get("k", lambda: "again") == "foreground"
    assert not is_background()


def test_a_caller_waits_for_a_foreground_computation_of_the_same_key() -> None:
    memo = Memo(4)
    started, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def slow() -> str:
        calls.append("first")
        started.set()
        assert release.wait(30)
        return "first"

    worker = _in_thread(lambda: memo.get("k", slow), background=False)
    assert started.wait(30)
    seen: dict[str, object] = {}
    waiter = _in_thread(lambda: seen.setdefault("v", memo.get("k", lambda: calls.append("second") or "x")),
                        background=True)
    release.set()
    worker.join(30)
    waiter.join(30)
    assert seen["v"] == "first" and calls == ["first"]
