"""Command-line interface: ``python -m privcore COMMAND ...``.

Each part of privcore keeps its sub-commands in its own ``cli`` module; this file only
registers them, so it stays a table of contents.
"""

from __future__ import annotations

import typer

from privcore.cli import release as api_cli
from privcore.cli.global_constant import global_app
from privcore.experiments.cli import experiment_app
from privcore.lab.cli import lab_app
from privcore.lipschitz.cli import cache_app
from privcore.train.cli import train_app
from privcore.train.cli_evaluate import evaluate

app = typer.Typer(
    name="privcore",
    help="privlens / privcore: inference-time privacy, certified.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def version() -> None:
    """Print privcore's version."""
    from privcore import __version__

    typer.echo(__version__)


# --- sub-command registrations (one line per part) ---
app.add_typer(train_app, name="train")
app.command("evaluate")(evaluate)
app.add_typer(experiment_app, name="experiment")
app.add_typer(lab_app, name="lab")
app.add_typer(cache_app, name="cache")
app.add_typer(global_app, name="global")
app.command("release")(api_cli.release)
app.command("certify")(api_cli.certify)
app.command("mechanisms")(api_cli.mechanisms)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m privcore`` and of the ``privcore`` command.

    Expected failures print one ``error: …`` line on stderr naming the problem and the fix and
    exit with 1 (2: bad parameter or usage); ``--debug`` (anywhere) or ``PRIVCORE_DEBUG=1`` shows
    the traceback instead.
    """
    import os
    import sys

    from privcore.cli.errors import USAGE, click_exceptions, describe

    click = click_exceptions()

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("PRIVCORE_DEBUG", "") not in ("", "0")
    args = [a for a in args if a != "--debug"]

    def fail(message: str, code: int) -> None:
        typer.echo(f"error: {message}", err=True)
        sys.exit(code)

    try:
        code = app(args=args, prog_name="privcore", standalone_mode=False)
    except click.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        sys.exit(USAGE)
    except click.UsageError as exc:
        if debug:
            raise
        where = f"; see `{exc.ctx.command_path} --help`" if exc.ctx is not None else ""
        fail(f"{exc.format_message().rstrip('.')}{where}", exc.exit_code)
    except click.ClickException as exc:
        if debug:
            raise
        fail(exc.format_message(), exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        fail("interrupted (runs that keep a resume file continue from it next time)", 130)
    except Exception as exc:
        if debug:
            raise
        fail(*describe(exc))
    else:
        if isinstance(code, int) and code:
            sys.exit(code)


def run() -> None:
    """The process entry of ``privcore`` and ``python -m privcore``: :func:`main`, then the exit.

    After the command, the ``atexit`` handlers run and the standard streams are flushed as at any
    exit, but the interpreter's teardown of its modules is skipped (``os._exit``): with torch loaded
    it adds about 0.3 s to every call and does nothing a finished command needs. Where a non-daemon
    thread is still running, or the command raised, the exit is the ordinary one."""
    import atexit
    import os
    import sys
    import threading

    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: the ordinary exit would report it and end with 120
        code = code or 120
    os._exit(code)
