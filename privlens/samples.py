"""The sample images the dashboard ships, ``data/samples/<dataset>/<label>-<index>.png``: pure Python,
no Streamlit. :func:`list_samples` lists them; the pages offer them beside an upload."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["REPO_ROOT", "SAMPLES_DIR", "Sample", "list_samples"]

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = REPO_ROOT / "data" / "samples"


@dataclass(frozen=True, kw_only=True)
class Sample:
    """A shipped sample image: file ``path``, display ``name`` and its test-set ``label``."""

    name: str
    label: str
    path: Path

    def data(self) -> bytes:
        """The PNG bytes."""
        return self.path.read_bytes()


def list_samples(dataset: str, *, root: Path | None = None) -> tuple[Sample, ...]:
    """Sample images of ``dataset`` (``data/samples/<dataset>/<label>-<index>.png``), sorted by name."""
    folder = (root or SAMPLES_DIR) / dataset
    if not folder.is_dir():
        return ()
    out = []
    for path in sorted(folder.glob("*.png")):
        label = path.stem.rpartition("-")[0]
        out.append(Sample(name=path.stem, label=label or path.stem, path=path))
    return tuple(out)
