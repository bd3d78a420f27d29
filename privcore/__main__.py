"""``python -m privcore ...``: the command-line interface."""

from privcore.cli import main

if __name__ == "__main__":
    main()
