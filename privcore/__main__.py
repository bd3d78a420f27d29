"""``python -m privcore ...``: the command-line interface."""

from privcore.cli import run

if __name__ == "__main__":
    run()
