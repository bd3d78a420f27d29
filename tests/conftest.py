"""Shared pytest configuration."""

from __future__ import annotations

import pytest


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
