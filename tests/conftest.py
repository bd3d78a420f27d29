"""Shared pytest configuration."""

from __future__ import annotations

import os
import tempfile

import pytest

# Every AppTest and test server starts the dashboard's warm-up thread, which enumerates, resolves and
# certifies the shipped models' pattern tables in the background (tens of seconds of LPs): dozens of
# short-lived dashboards doing that at once would only slow the suite. Tables are then built on demand,
# as in any process; the warm-up itself is tested in tests/test_lipschitz_patterns.py.
os.environ.setdefault("PRIVLENS_WARM_UP", "off")
# the live accuracy of a mechanism with per-image certificates scores a few test images, not hundreds
os.environ.setdefault("PRIVLENS_CERTIFIED_IMAGES", "8")
# Background threads (those tables) run at the process's own priority: the suite's parallel workers keep
# every core busy, and at nice 19 a table a test waits for would barely run (minutes of waiting).
os.environ.setdefault("PRIVLENS_BACKGROUND_NICE", "0")
# Ledgers the dashboards of this test run keep go to a private folder of their own, never the checkout's.
os.environ.setdefault("PRIVLENS_LEDGER_DIR", tempfile.mkdtemp(prefix="privlens-ledgers-"))


def pytest_configure(config: pytest.Config) -> None:
    """Every AppTest scans all installed distributions' metadata for Streamlit components on its first run
    (0.5–1 s under load, ~0.15 CPU-s, hundreds of AppTests per run); the installed set does not change
    during a run, so this process scans once and every AppTest registers the same manifests."""
    import functools

    from streamlit.components.v2 import manifest_scanner

    scan_once = functools.cache(manifest_scanner.scan_component_manifests)
    manifest_scanner.scan_component_manifests = lambda max_workers=None: list(scan_once())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that collected no test is a failure, never a vacuous pass."""
    if session.testscollected == 0:
        session.exitstatus = 1


@pytest.fixture(autouse=True)
def _restore_main_module():
    """Streamlit's script runner (AppTest) installs the app as ``sys.modules["__main__"]`` and
    leaves it there; a later ``spawn`` worker would then re-run the dashboard instead of pytest."""
    import sys

    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main
