"""A progress bar that interrupts training after a given number of epochs, for resume tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Interrupt(Exception):
    """Raised by :func:`bar_that_dies` in place of a kill."""


def bar_that_dies(real_bar: Callable[..., Any], at: int = 2) -> Callable[..., Any]:
    """Wrap ``epoch_bar`` so that its ``at``-th update raises :class:`Interrupt`: the state after
    epoch ``at`` is on disk, and the run dies before the next epoch."""

    def make(*args: Any, **kw: Any) -> Any:
        bar = real_bar(*args, **kw)
        calls = {"n": 0}
        update = bar.update

        def upd(k: int = 1) -> None:
            calls["n"] += 1
            if calls["n"] == at:
                raise Interrupt
            update(k)

        bar.update = upd
        return bar

    return make
