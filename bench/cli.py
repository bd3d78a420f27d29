"""The command line's speed, this checkout against a git revision, side by side (issue 33, item 3).

    .venv/bin/python bench/cli.py                      # against 824e507, 5 rounds
    .venv/bin/python bench/cli.py --rev HEAD~3 --rounds 9
    .venv/bin/python bench/cli.py --base /tmp/cli-base  # an existing checkout as the baseline

Times two commands as a user runs them, each a fresh process (``python -m privcore …``, wall clock
from start to exit):

* ``help``: ``privcore --help``;
* ``release``: ``privcore release <a shipped digits sample> --dataset digits --epsilon 1`` (the certified
  global mechanism: the process loads the models and certifies G itself, as every release does);
* ``default``: ``privcore release <a sample of the tree's default dataset> --epsilon 1``: what a user of
  each revision runs first (digits before issue 33.1, real MNIST and N-global after).

Both trees first get their bytecode written (``compileall``, what ``make run`` and ``make test`` do since
issue 33): where ``PYTHONDONTWRITEBYTECODE`` is set, a tree without it compiles privcore at every call.
``--no-bytecode`` leaves both trees as they are.

The baseline is the revision ``--rev`` checked out with ``git worktree add`` at ``--base`` (made if
missing, removed at the end unless ``--keep``); both trees run with the same interpreter and the
same fresh cache directory, each importing its own ``privcore`` (checked before timing). Rounds
alternate the two trees (A B, then B A, …) so that a change in the machine's load hits both; the
table gives per command the median and the spread of each, the ratio of the medians (this
checkout / baseline) and the 1-minute load average before and after. The machine is shared: read
the ratio, not the absolute seconds, when the load is high. No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import default_dataset  # bench/load.py: the standard library only

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = Path("data/samples/digits/0-24.png")
COMMANDS: dict[str, list[str]] = {
    "help": ["--help"],
    "release": ["release", str(SAMPLE), "--dataset", "digits", "--epsilon", "1"],
    "default": [],  # each tree's own embedded default on a sample of its default dataset (_args)
}


def _args(command: str, tree: Path) -> list[str]:
    """The arguments of ``command`` in ``tree``: ``default`` releases a sample of the tree's default
    dataset with no --dataset (digits before privcore/defaults.py existed, its DEFAULT_DATASET after)."""
    if command != "default":
        return COMMANDS[command]
    dataset = default_dataset(tree)
    sample = sorted((tree / "data" / "samples" / dataset).glob("*.png"))[-1]
    return ["release", str(sample.relative_to(tree)), "--epsilon", "1"]


def load1() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def _env(tree: Path, cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PYTHONPATH=str(tree), PRIVLENS_CACHE_DIR=str(cache))
    env.pop("PRIVCORE_MODELS_DIR", None)  # each tree's own shipped models
    return env


def _check_tree(tree: Path, cache: Path) -> None:
    """``tree``'s own privcore is the one imported there (not an installed copy)."""
    out = subprocess.run([sys.executable, "-c", "import privcore; print(privcore.__file__)"], cwd=tree,
                         env=_env(tree, cache), capture_output=True, text=True, check=True)
    where = Path(out.stdout.strip()).resolve()
    if tree.resolve() not in where.parents:
        raise SystemExit(f"{tree}: python imports privcore from {where}, not from the tree")


def run_once(tree: Path, args: list[str], cache: Path) -> float:
    """Seconds of one ``python -m privcore ARGS`` in ``tree`` (exit 0 required)."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "privcore", *args], cwd=tree, env=_env(tree, cache),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{tree}: privcore {' '.join(args)} exited {out.returncode}: {out.stderr[-2000:]}")
    return seconds


def write_bytecode(tree: Path) -> None:
    """``tree``'s privcore compiled to ``__pycache__`` (what ``make``'s bytecode target does)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", "privcore"], cwd=tree, check=True,
                   stdout=subprocess.DEVNULL)


def _worktree(rev: str, base: Path) -> bool:
    """Check out ``rev`` at ``base`` unless a checkout of ``rev`` is there (a checkout of another revision
    is an error); True when this call made it."""
    if (base / "privcore" / "__init__.py").is_file():
        def head(where: Path, what: str) -> str:
            return subprocess.run(["git", "rev-parse", what], cwd=where, capture_output=True, text=True,
                                  check=True).stdout.strip()

        found, wanted = head(base, "HEAD"), head(ROOT, f"{rev}^{{commit}}")
        if found != wanted:
            raise SystemExit(f"{base} holds {found[:12]}, not --rev {rev} ({wanted[:12]}): remove it or "
                             f"pass another --base")
        return False
    subprocess.run(["git", "worktree", "add", "--detach", str(base), rev], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rev", default="824e507", help="baseline git revision (default: 824e507)")
    p.add_argument("--base", type=Path, default=Path("/tmp/cli-base"), help="baseline checkout directory")
    p.add_argument("--rounds", type=int, default=5, help="runs of each command per tree")
    p.add_argument("--commands", nargs="+", default=list(COMMANDS), choices=list(COMMANDS))
    p.add_argument("--keep", action="store_true", help="keep a worktree this run made")
    p.add_argument("--no-bytecode", action="store_true", help="do not compileall the trees first")
    a = p.parse_args(argv)
    made = _worktree(a.rev, a.base)
    trees = {"this": ROOT, "base": a.base}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
            cache = Path(tmp)
            for tree in trees.values():
                _check_tree(tree, cache)
                if not a.no_bytecode:
                    write_bytecode(tree)
                run_once(tree, ["--help"], cache)  # warm-up: files in the page cache
            before = load1()
            times: dict[tuple[str, str], list[float]] = {(c, t): [] for c in a.commands for t in trees}
            for r in range(a.rounds):
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                for command in a.commands:
                    for name in order:
                        times[command, name].append(run_once(trees[name], _args(command, trees[name]), cache))
            after = load1()
    finally:
        if made and not a.keep:
            subprocess.run(["git", "worktree", "remove", "--force", str(a.base)], cwd=ROOT, check=False)
            shutil.rmtree(a.base, ignore_errors=True)

    print(f"privcore CLI, this checkout ({ROOT}) vs {a.rev} ({a.base}); {a.rounds} alternating rounds")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; 1-min load average {before:.2f} before, "
          f"{after:.2f} after; bytecode {'as found' if a.no_bytecode else 'written in both trees'}")
    print(f"{'command':<10} {'this median':>12} {'(min–max)':>14} {'base median':>12} {'(min–max)':>14} "
          f"{'this/base':>10}")
    for command in a.commands:
        mine, base = times[command, "this"], times[command, "base"]
        m, b = statistics.median(mine), statistics.median(base)
        print(f"{command:<10} {m:>11.3f}s {f'({min(mine):.2f}–{max(mine):.2f})':>14} {b:>11.3f}s "
              f"{f'({min(base):.2f}–{max(base):.2f})':>14} {m / b:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
