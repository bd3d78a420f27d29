"""Shared pytest configuration."""

from __future__ import annotations

import pytest


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that collected no test is a failure, never a vacuous pass."""
    if session.testscollected == 0:
        session.exitstatus = 1
