"""Shared plumbing of the experiments: the run's context (:class:`RunContext`), progress and figures.

Every experiment (``python -m privcore experiment NAME --dataset D``) writes
``data/results/<D>/<NAME>.csv`` (one row per setting), ``<NAME>.json`` (provenance) and a plotly
figure, as documented in ``data/results/README.md``. The resumable tables are
:mod:`privcore.experiments.tables`'; figures are written atomically too (:mod:`privcore._atomic`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privcore._atomic import atomic_path, atomic_write_text
from privcore._paths import results_dir
from privcore.experiments.tables import Parts, ResultTable
from privcore.ranges import CERTIFIERS
from privcore.validation import check_choice, check_int

__all__ = [
    "DEFAULT_RESULTS_DIR",
    "PngExportWarning",
    "Progress",
    "RunContext",
    "progress_bar",
    "save_figure",
]

#: Where results live unless ``--out`` says otherwise: ``<repository>/data/results`` from a
#: checkout, ``./data/results`` from an installed package.
DEFAULT_RESULTS_DIR = results_dir()

#: ``progress(done, total, message)``: how long operations report progress.
Progress = Callable[[int, int, str], None]


def _no_progress(done: int, total: int, message: str) -> None:
    return None


class PngExportWarning(UserWarning):
    """A figure's PNG could not be written (its HTML was): the reason and the fix are in the text."""


def save_figure(fig: Any, stem: str | os.PathLike[str], *, png: bool = True) -> list[str]:
    """Write a plotly figure as ``stem.html`` and ``stem.png`` (kaleido, which drives a Chromium);
    return the file names written. A PNG that cannot be written is a :class:`PngExportWarning`
    naming the reason and the fix, never silent; the HTML is written either way.
    ``PRIVCORE_FIGURE_PNG=0`` skips the PNG on purpose (no warning).

    The HTML loads ``plotly.min.js`` from the results root (``<stem>/../../plotly.min.js``, written
    once), so pages work offline without a 4.8 MB copy of plotly.js per figure.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    shared = stem.parent.parent / "plotly.min.js"
    if not shared.is_file():
        from plotly.offline import get_plotlyjs

        atomic_write_text(shared, get_plotlyjs())
    html = stem.with_suffix(".html")
    with atomic_path(html) as tmp:
        fig.write_html(str(tmp), include_plotlyjs="../plotly.min.js", full_html=True)
    written = [html.name]
    if png and os.environ.get("PRIVCORE_FIGURE_PNG", "1") == "0":
        png = False  # asked for explicitly (the tests: kaleido starts a Chromium per figure, ~5 s)
    if png:
        try:
            with atomic_path(stem.with_suffix(".png")) as tmp:
                fig.write_image(str(tmp), scale=2)
            written.append(stem.with_suffix(".png").name)
        except (ValueError, ImportError, RuntimeError, OSError) as exc:
            warnings.warn(
                f"{stem.name}.png not written ({type(exc).__name__}: {str(exc).strip().splitlines()[0]}); "
                "its HTML is there. Fix: pip install kaleido, and a Chromium for it "
                "(Debian: apt-get install chromium; or set BROWSER_PATH to a Chrome/Chromium)",
                PngExportWarning,
                stacklevel=2,
            )
    return written


@contextmanager
def progress_bar(description: str, *, enabled: bool = True) -> Iterator[Progress]:
    """A rich progress bar as a ``progress(done, total, message)`` callback (no-op when disabled)."""
    if not enabled:
        yield _no_progress
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=False,
        console=Console(stderr=True),  # progress on stderr: stdout stays for results
    ) as prog:
        task = prog.add_task(description, total=None)

        def update(done: int, total: int, message: str) -> None:
            prog.update(task, completed=done, total=total, description=f"{description} {message}".rstrip())

        yield update


MODES = ("tiny", "quick", "full")


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What every experiment gets: dataset, mode, where to write, seed, device, progress.

    ``mode`` is ``full`` (the papers' settings, as far as two CPU cores allow), ``quick`` (a
    subsample: every experiment of one dataset in minutes) or ``tiny`` (seconds; for tests).
    ``workers`` is the number of solver processes; ``executor`` runs batch certification (None:
    ``workers`` local processes; or a :mod:`privcore.executors` executor such as Ray);
    ``models_dir`` where checkpoints are read from (default: the pipeline's,
    ``$PRIVCORE_MODELS_DIR`` or ``models/``).
    """

    dataset: str
    mode: str = "full"
    out_dir: Path = DEFAULT_RESULTS_DIR
    seed: int = 0
    device: str = "auto"
    certifier: str = "exact"
    workers: int = 2
    models_dir: Path | None = None
    fresh: bool = False
    show_progress: bool = True
    command: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    executor: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, MODES)
        check_int("seed", self.seed, minimum=0)
        check_choice("certifier", self.certifier, CERTIFIERS)
        check_int("workers", self.workers, minimum=1)
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        if self.models_dir is not None:
            object.__setattr__(self, "models_dir", Path(self.models_dir))

    @property
    def quick(self) -> bool:
        """True in ``quick`` and ``tiny`` modes."""
        return self.mode != "full"

    def pick(self, *, full: Any, quick: Any, tiny: Any) -> Any:
        """The value of a size parameter for this mode."""
        return {"full": full, "quick": quick, "tiny": tiny}[self.mode]

    def n_test(self, *, full: int | None, quick: int, tiny: int) -> int | None:
        """Test-subsample size for this mode, unless ``--n-test`` overrides it (None = whole test set)."""
        override = self.options.get("n_test")
        return int(override) if override else self.pick(full=full, quick=quick, tiny=tiny)

    @property
    def dataset_dir(self) -> Path:
        """``<out_dir>/<dataset>``."""
        return self.out_dir / self.dataset

    def table(
        self,
        name: str,
        *,
        columns: Sequence[str],
        key: Sequence[str],
        config: Mapping[str, Any],
        parts: Parts | None = None,
    ) -> ResultTable:
        """The resumable table ``<out_dir>/<dataset>/<name>.csv`` for this run (``parts``: see
        :class:`ResultTable`)."""
        full_config = {"dataset": self.dataset, "mode": self.mode, "seed": self.seed, **dict(config)}
        return ResultTable(
            self.dataset_dir / f"{name}.csv",
            columns=columns,
            key=key,
            config=full_config,
            command=self.command or default_command(),
            fresh=self.fresh,
            parts=parts,
        )

    def pipeline(self, obfuscator: str = "ARL-C-N"):  # -> privcore.models.pipeline.Pipeline
        """The verified posthoc-PTR networks of this dataset (CheckpointError naming what is missing)."""
        from privcore.models.pipeline import load_pipeline

        return load_pipeline(self.dataset, obfuscator, models_dir=self.models_dir, device=self.torch_device())

    def model_infos(self):  # -> list[privcore.models.pipeline.ModelInfo]
        """Cards of every checkpoint of this dataset."""
        from privcore.models.pipeline import list_models

        return [m for m in list_models(self.models_dir) if m.dataset == self.dataset]

    def classifier_weights(self, variants: Sequence[str]) -> dict[str, str | None]:
        """SHA-256 of each variant's release classifier (None: the obfuscator's own head), followed by
        a hash of its told-scale map when the card has one, for table configs: refitting a classifier
        or recalibrating its map (which changes what it predicts, same weights) invalidates rows
        computed with the old one."""
        def key(card: Mapping[str, Any]) -> str:
            sha = str(card["weights"]["sha256"])
            told = card.get("architecture", {}).get("classifier", {}).get("kwargs", {}).get("told_scale")
            if not told:
                return sha
            blob = json.dumps(told, sort_keys=True, separators=(",", ":")).encode()
            return f"{sha}+told-scale:{hashlib.sha256(blob).hexdigest()[:16]}"

        infos = self.model_infos()
        shas = {m.name: key(m.card) for m in infos if m.kind == "release-classifier"}
        return {v: shas.get(f"classifier-{v}") for v in variants}

    def torch_device(self):  # -> torch.device
        """CUDA when present (or asked for), else CPU."""
        import torch

        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)

    @contextmanager
    def progress(self, description: str) -> Iterator[Progress]:
        """Progress callback for one long step of the experiment."""
        with progress_bar(f"[{self.dataset}] {description}", enabled=self.show_progress) as update:
            yield update


def default_command() -> str:
    """The command line that started this process, as the user would retype it."""
    return "python -m privcore " + " ".join(shlex.quote(a) for a in sys.argv[1:])
