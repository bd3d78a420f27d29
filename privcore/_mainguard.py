"""Is it safe to start ``spawn`` worker processes from here?

A ``spawn`` child re-runs the main script's top level (as ``__mp_main__``) before it takes work.
A script that calls a batch function at its top level, outside ``if __name__ == "__main__":``,
therefore makes every child call it again; each child's own pool fails to bootstrap and the
parent resubmits forever (seen: a 40-point ``compute_phis`` from such a script never returned).
:func:`unguarded_main_call` finds that case before any process is started, so that
:class:`privcore.executors.LocalExecutor` can run the work in this process instead.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

__all__ = ["unguarded_main_call"]


def _guard_lines(tree: ast.Module) -> list[tuple[int, int]]:
    """Line spans of the top-level ``if __name__ == "__main__":`` bodies (either operand order)."""
    spans = []
    for node in tree.body:
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            continue
        operands = [node.test.left, *node.test.comparators]
        names = {o.id for o in operands if isinstance(o, ast.Name)}
        consts = {o.value for o in operands if isinstance(o, ast.Constant)}
        if "__name__" in names and "__main__" in consts and node.body:
            spans.append((node.body[0].lineno, max(n.end_lineno or n.lineno for n in node.body)))
    return spans


def unguarded_main_call() -> str | None:
    """The main script's path when the current call comes from its top level outside a
    ``__name__ == "__main__"`` guard (spawned workers would re-run it), else None.

    No script (interactive, ``python -c``, a notebook) or a call under the guard is safe.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or not Path(path).is_file():
        return None
    frame = sys._getframe(1)
    top = None
    while frame is not None:  # the outermost frame running the main script's module code
        if frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>":
            top = frame
        frame = frame.f_back
    if top is None:
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    line = top.f_lineno
    return None if any(lo <= line <= hi for lo, hi in _guard_lines(tree)) else str(path)
