"""The authors'-code twin of ARL-C-N: their public code's settings, not App. E's.

Source: github.com/tremblerz/posthoc_privacy at 66a8d35 (HEAD), ``adversarial_training.py`` (AT),
``experiment_automation.py`` (EA), ``models/fc.py`` (FC), ``utils.py`` (U):

* ARL-CN configs: MNIST α = 0.99, λ = 100, margin 25, σ = 0.01 (EA:89); Fashion-MNIST α = 0.995,
  λ = 50, margin 25, σ = 0.01 (EA:91, AT:310);
* obfuscator widths [8, 10, 8] (AT:57; [8, 8, 8, 8] up to abc903c, AT:56 there);
* classifier widths MNIST [8, 50, 10] (FC:8–24), Fashion-MNIST [8, 10, 10, 10, 10, 10] (FC:56–72;
  theirs add BatchNorm/Dropout and ``LeakyReLU(True)``, i.e. slope 1: linear; ours are ReLU MLPs);
* Adam lr 1e-4 for f and h, Adam's default 1e-3 for the adversary (AT:79–81); batch 128 (U:100);
  500 epochs, no warm-up, no classifier refit (AT:314–316);
* N: Lap(σ) on the detached z̃ for h's step only (AT:206–208; f's step reads h(z̃) clean, AT:225);
* C: ``contrastive_loss(z, labels)`` on the obfuscator's *input* z, sampled under ``no_grad``
  (AT:193–198, 232): logged, but no gradient reaches f;
* ARL: f minimises −α·MSE + (1 − α)·CE (AT:229; +α·MSE up to abc903c, AT:223 there);
* checkpoint: the epoch with the lowest *test* α·MSE + (1 − α)·CE (AT:285–294).

Replaced here: checkpoint selection reads the validation split's noise-free accuracy, never the test
set; z is the VAE mean (theirs a sample, AT:198); the embedder is ours (theirs β = 1.5 for MNIST,
β = 2 for Fashion-MNIST, AT:115–117); their classifiers' BatchNorm and Dropout are left out.

The second twin, ``ARL-C-N-authors-abc903c``, follows commit abc903c ("several new changes for iclr
prep", the last before HEAD), whose VAE has nz = 8 (``embedding.py:27, 29``) as its configs expect
(obf_in = 8, AT:297–300 there). Its differences from the HEAD twin, file:line at abc903c:

* obfuscator widths [8, 8, 8, 8] (AT:56);
* classifier widths [8, 10, 10, 10, 10, 10] for MNIST and Fashion-MNIST alike (FC:4–49);
* Adam at its default lr 1e-3 for f, h and the adversary (AT:78–80); batch 64 (U:100, AT:124);
* 50 epochs (AT:304);
* ARL: f minimises +α·MSE + (1 − α)·CE (AT:223): f helps the adversary;
* the same N (AT:200–204, 218–219), C on the input z (AT:189–194, 226) and weights (MNIST α = 0.99,
  λ = 100, AT:297–299; Fashion-MNIST α = 0.995, λ = 50, AT:300; σ = 0.01, margin 25);
* checkpoint: the epoch with the lowest test α·MSE + (1 − α)·CE (AT:275–284); here validation.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AUTHORS_CODE",
    "AUTHORS_CODE_ABC903C",
    "AUTHORS_COMMITS",
    "AUTHORS_RECIPE_SUFFIX",
    "authors_code",
    "authors_overrides",
]

#: Checkpoint-name suffix of the authors'-code twin, e.g. ``ARL-C-N-authors``.
AUTHORS_RECIPE_SUFFIX = "-authors"
#: The authors' commits a twin follows: HEAD (the default) and abc903c, whose checkpoint name ends in
#: ``-authors-abc903c``.
AUTHORS_COMMITS: tuple[str, ...] = ("66a8d35", "abc903c")

#: Provenance recorded on the card (file:line at 66a8d35 unless stated).
AUTHORS_CODE: dict[str, str] = {
    "repository": "github.com/tremblerz/posthoc_privacy",
    "commit": "66a8d35",
    "weights": "experiment_automation.py:89 (MNIST), :91 and adversarial_training.py:310 (Fashion-MNIST)",
    "obfuscator_widths": "adversarial_training.py:57 ([in, 10, out]; [in, 8, 8, out] up to abc903c)",
    "classifier_widths": "models/fc.py:4-25 (MNIST), :52-73 (Fashion-MNIST)",
    "lr": "adversarial_training.py:79-81 (f, h: 1e-4; adversary: Adam default 1e-3)",
    "batch_size": "utils.py:100 (128)",
    "epochs": "adversarial_training.py:314 (500)",
    "noise": "adversarial_training.py:178-180, 206-208 (Lap(sigma) on detached z~, h's step only)",
    "contrastive": "adversarial_training.py:193-198, 231-236 (on the input z, no_grad: no gradient to f)",
    "arl_sign": "adversarial_training.py:229 (-alpha*rec; +alpha*rec up to abc903c)",
    "checkpoint": "adversarial_training.py:285-294 (min test loss); here: max validation accuracy",
}

#: Provenance of the abc903c twin (file:line at abc903c).
AUTHORS_CODE_ABC903C: dict[str, str] = {
    "repository": "github.com/tremblerz/posthoc_privacy",
    "commit": "abc903c",
    "embedder": "embedding.py:27, 29 (nz = 8)",
    "weights": "adversarial_training.py:297-299 (MNIST), :300 (Fashion-MNIST)",
    "obfuscator_widths": "adversarial_training.py:56 ([in, 8, 8, out])",
    "classifier_widths": "models/fc.py:4-49 ([in, 10, 10, 10, 10, 10], MNIST and Fashion-MNIST)",
    "lr": "adversarial_training.py:78-80 (Adam default 1e-3 for f, h and the adversary)",
    "batch_size": "utils.py:100, adversarial_training.py:124 (64)",
    "epochs": "adversarial_training.py:304 (50)",
    "noise": "adversarial_training.py:200-204, 218-219 (Lap(sigma) on detached z~, h's step only)",
    "contrastive": "adversarial_training.py:189-194, 226 (on the input z: no gradient to f)",
    "arl_sign": "adversarial_training.py:223 (+alpha*rec: f helps the adversary)",
    "checkpoint": "adversarial_training.py:275-284 (min test loss); here: max validation accuracy",
}

# Per dataset: their ARL-CN weights and classifier widths (see the module docstring).
_WEIGHTS: dict[str, dict[str, Any]] = {
    "mnist": {"alpha": 0.99, "lam": 100.0, "classifier_hidden": (50,)},
    "fashion-mnist": {"alpha": 0.995, "lam": 50.0, "classifier_hidden": (10, 10, 10, 10)},
}
# Datasets without a config of theirs (digits: the tests' toy) take the Fashion-MNIST one.
_FALLBACK = "fashion-mnist"


#: What abc903c's twin changes in the HEAD twin's recipe (see the module docstring).
_ABC903C: dict[str, Any] = {
    "authors_commit": "abc903c",
    "obfuscator_hidden": (8, 8),
    "classifier_hidden": (10, 10, 10, 10),
    "lr": 1e-3,
    "adversary_lr": 1e-3,
    "batch_size": 64,
    "epochs": 50,
    "arl_sign": 1.0,
}


def authors_code(commit: str) -> dict[str, str]:
    """The card's provenance of the twin that follows ``commit``."""
    return AUTHORS_CODE_ABC903C if commit == "abc903c" else AUTHORS_CODE


def authors_overrides(dataset: str, variant: str, commit: str = AUTHORS_COMMITS[0]) -> dict[str, Any]:
    """Recipe fields of the authors'-code twin of ``variant`` on ``dataset`` (only ARL-C-N) at their
    ``commit`` (one of :data:`AUTHORS_COMMITS`)."""
    if variant != "ARL-C-N":
        raise ValueError(f"the authors'-code twin exists for 'ARL-C-N' only, got {variant!r}")
    if commit not in AUTHORS_COMMITS:
        raise ValueError(f"commit must be one of {', '.join(AUTHORS_COMMITS)}, got {commit!r}")
    head = {
        "authors_code": True,
        "noise_mode": "paper",
        "sigma": 0.01,
        "margin": 25.0,
        "contrastive_units": "raw",
        "contrastive_grad": False,
        "noise_on_f": False,
        "obfuscator_hidden": (10,),
        "lr": 1e-4,
        "adversary_lr": 1e-3,
        "batch_size": 128,
        "epochs": 500,
        "warmup_epochs": 0,
        "classifier_refit_epochs": 0,
        "select_on_validation": True,
        **_WEIGHTS.get(dataset, _WEIGHTS[_FALLBACK]),
    }
    return {**head, **_ABC903C} if commit == "abc903c" else head
