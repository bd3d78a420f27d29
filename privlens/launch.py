"""``privlens [STREAMLIT OPTIONS]``: start the dashboard from wherever privlens is installed.

Runs ``streamlit run <app.py>`` on the entry script shipped with the package (``privlens/_site``
in a wheel, the repository root in a checkout) with the shipped ``.streamlit/config.toml`` turned
into command-line options (Streamlit reads that file only from the working directory); options
given to ``privlens`` come after them and so win, e.g. ``privlens --server.port 8600``. Before the
server starts, :func:`privlens.netguard.install` stops Streamlit's look-ups of this machine's
addresses on the network. ``python -m privlens`` is the same command (``make run`` uses it).
"""

from __future__ import annotations

import sys
import tomllib
from importlib import resources
from pathlib import Path

__all__ = ["app_path", "config_options", "main"]


def site_dir() -> Path:
    """The folder holding ``app.py``, ``pages/`` and ``.streamlit/``: the installed package data
    when present, else the checkout's root."""
    shipped = Path(str(resources.files("privlens").joinpath("_site")))
    if (shipped / "app.py").is_file():
        return shipped
    return Path(__file__).resolve().parents[1]


def app_path() -> Path:
    """The dashboard's entry script."""
    return site_dir() / "app.py"


def config_options(config: Path | None = None) -> list[str]:
    """``--section.key=value`` for every setting of the shipped Streamlit config (none if absent)."""
    config = config or site_dir() / ".streamlit" / "config.toml"
    if not config.is_file():
        return []
    with open(config, "rb") as f:
        table = tomllib.load(f)
    out = []
    for section, values in table.items():
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            out.append(f"--{section}.{key}={text}")
    return out


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``privlens`` command: every argument is passed to ``streamlit run``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip().splitlines()[0].strip("`").strip())
        print("Any `streamlit run` option is accepted, e.g. privlens --server.port 8600")
        return
    from streamlit.web import cli as stcli

    from privlens import netguard

    netguard.install()  # before the server prints its URLs or checks an origin
    sys.argv = ["streamlit", "run", str(app_path()), "--server.headless=true", *config_options(), *args]
    sys.exit(stcli.main())
