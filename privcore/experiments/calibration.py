"""``experiment calibration``: our shipped obfuscators under the paper's and the authors' calibrations.

Every row is the accuracy of noisy releases f(z) + Lap(b) with PTR's test skipped (every image
released), averaged over the images and ``n_draws`` seeded draws per image, for one scale b:

* ``ours`` — b = Δp·R/ε with Δp = μ + 3σ of exact ℓ∞→ℓ1 local constants on *training* embeddings
  (the card's; what privcore releases inside PTR, docs/DESIGN.md). Private inside PTR. Followed up
  to ε = 100, with ``accuracy_refit`` (the classifier fine-tuned on training releases at that
  noise, as in ``table1``), to show at which ε our obfuscators reach the paper's accuracies.
* ``paper-text`` — b = Δp/ε, the formula *printed* in the paper (Sec. 4 and Alg. 1) with the same
  Δp. The authors' code never runs it (below). 1/R times the noise of ``ours``: private for R ≤ 1.
* ``authors-code`` — the protocol of the authors' code for Table 1 (github.com/tremblerz/posthoc_privacy
  at 66a8d35, ``experiment_automation.py:multi_eps``): b = Δp∞·R/ε (``effective_eps = eps / radius``,
  line 131; ``scale = sens / eps``, line 18), every test image released with no PTR test and no ⊥
  (lines 133–147), ε ∈ {1, 2, 5, 10, ∞} (line 130), z the VAE mean (line 135), classified by the
  head trained jointly with the obfuscator (``pred_model``, line 143; here the obfuscator's own
  head). Δp∞ = μ + 3σ (``privacy_estimation.py:223``; σ = ``np.std``, population) of exact ℓ∞→ℓ∞
  local constants (LipMIP's ``'l1Ball1'`` c-set, ``privacy_estimation.py:167–171``) at radius R
  over the first ``AUTHORS_DP_POINTS`` = 101 *test* images (unshuffled test loader, batch 1,
  ``sample_size > eval_size = 100`` stops the loop, lines 161–190; ``utils.py:126``), each centred
  at a posterior sample z = μ + σ·N(0, 1) (``vae.reparametrize``, lines 164–165). Not private:
  ℓ∞→ℓ∞ can be up to m times below the ℓ∞→ℓ1 sensitivity the paper's d_Y = ℓ1 needs, Δp∞ is read
  from test points, and nothing is tested. All test images × ``AUTHORS_DRAWS`` draws.
* ``authors-code-release-clf`` — the same noise draws read by the shipped release classifier
  (told b) instead of the obfuscator's head. Not private either.

The noise here is plain torch sampling: an accuracy simulation, not a release. Certificates are
cached. The ``ours`` rows draw the noise stream keyed ``corrected`` (:data:`_STREAM`), the stream the
committed results were made with, so their numbers match them.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from privcore.experiments.ptr_common import embed, refit_classifier, refit_plan, test_indices
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed

__all__ = [
    "AUTHORS_DP_POINTS",
    "AUTHORS_DRAWS",
    "CALIBRATIONS",
    "COLUMNS",
    "EPSILONS_AUTHORS",
    "authors_delta_p_linf",
    "run",
]

COLUMNS = (
    "dataset",
    "obfuscator",
    "calibration",
    "epsilon",
    "radius",
    "delta_p",
    "noise_scale_mean",
    "accuracy_mean",
    "accuracy_std",
    "accuracy_refit",
    "private",
    "n_draws",
    "n_test",
)
KEY = ("obfuscator", "calibration", "epsilon")
CALIBRATIONS = ("ours", "paper-text", "authors-code", "authors-code-release-clf")
#: the two calibrations of the shipped Δp, on the test subsample
EPSILONS = (1.0, 2.0, 5.0, 10.0)
#: ``ours`` is also followed to large ε: where would the paper's accuracies be reached?
EPSILONS_OURS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
#: the authors' ``eps_list`` (experiment_automation.py:130); ∞ is their noise-free column
EPSILONS_AUTHORS = (1.0, 2.0, 5.0, 10.0, math.inf)
#: test points of the authors' Δp∞: ``eval_size = 100`` and ``sample_size > eval_size`` ends the loop
AUTHORS_DP_POINTS = 101
#: noise draws per test image for the authors' protocol (their code draws once)
AUTHORS_DRAWS = 3
#: the noise stream of a calibration's rows (``ours`` draws the stream keyed ``corrected``)
_STREAM = {"ours": "corrected"}


def authors_delta_p_linf(constants: Any) -> dict[str, float]:
    """Δp∞ as the authors computed it: μ + 3σ of the local constants with σ = ``np.std`` (ddof = 0:
    ``np.array(lip_vals).std()``, privacy_estimation.py:196, then ``mean_lc + 3 * std_lc``, :223)."""
    v = np.asarray(constants, dtype=np.float64)
    if v.size < 2:
        raise ValueError(f"need at least 2 local constants, got {v.size}")
    mu, sd = float(v.mean()), float(v.std())
    return {"mu": mu, "sigma": sd, "proposed": mu + 3.0 * sd, "n": int(v.size), "max": float(v.max())}


def _authors_centers(pipe: Any, x: Any, seed: int) -> np.ndarray:
    """z = μ(x) + σ(x)·N(0, 1) for each image (``vae.reparametrize``, privacy_estimation.py:164–165)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    vae = pipe.embedder.vae
    with torch.no_grad():
        mu, logvar = vae.encode(torch.as_tensor(x).to(pipe.device, torch.float32))
        mu, sd = mu.double().cpu(), torch.exp(0.5 * logvar).double().cpu()
    return (mu + sd * torch.randn(mu.shape, generator=gen, dtype=torch.float64)).numpy()


def _own_head(ctx: RunContext, variant: str) -> Any:
    """The classifier trained jointly with the obfuscator (the authors' ``pred_model``)."""
    from privcore.models.pipeline import default_models_dir
    from privcore.nets.checkpoint import load_checkpoint

    mdir = ctx.models_dir if ctx.models_dir is not None else default_models_dir()
    stem = mdir / ctx.dataset / f"obfuscator-{variant}"
    ckpt = load_checkpoint(stem, kind="obfuscator", dataset=ctx.dataset, device=ctx.torch_device())
    return ckpt["classifier"]


def _figure(frame: Any, dataset: str) -> Any:
    from plotly.subplots import make_subplots

    frame = frame[np.isfinite(frame["epsilon"])]
    names = list(dict.fromkeys(frame["obfuscator"]))
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names, shared_yaxes=True)
    palette = {
        "ours": "#1f77b4",
        "paper-text": "#ff7f0e",
        "authors-code": "#2ca02c",
        "authors-code-release-clf": "#98df8a",
    }
    for col, name in enumerate(names, start=1):
        for cal, part in frame[frame["obfuscator"] == name].groupby("calibration", sort=False):
            part = part.sort_values("epsilon")
            fig.add_scatter(
                x=part["epsilon"],
                y=part["accuracy_mean"],
                mode="lines+markers",
                name=cal,
                legendgroup=cal,
                showlegend=col == 1,
                line_color=palette.get(cal),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="ε", type="log", row=1, col=col)
    fig.update_yaxes(title_text="accuracy of noisy releases (no ⊥)", row=1, col=1)
    fig.update_layout(
        title=f"Release calibration vs accuracy ({dataset}); only 'ours' is private (inside PTR)",
        template="plotly_white",
        height=420,
    )
    return fig


def _noisy_accuracy(zt: Any, y: np.ndarray, b: float, classifiers: dict[str, Any], n_draws: int,
                    seed: int) -> dict[str, list[float]]:
    """Accuracy of each classifier on the same ``n_draws`` noise draws f(z) + Lap(b) (b = 0: one)."""
    import torch

    from privcore.nets.models import classify
    from privcore.train.release_aware import laplace_release_noise

    gen = torch.Generator().manual_seed(seed)
    accs: dict[str, list[float]] = {k: [] for k in classifiers}
    for _ in range(n_draws if b > 0 else 1):
        noisy = zt + laplace_release_noise(zt.shape, b, generator=gen) if b > 0 else zt
        for k, clf in classifiers.items():
            with torch.no_grad():
                dev = next(clf.parameters()).device
                pred = classify(clf, noisy.to(dev), b).argmax(-1).cpu().numpy()
            accs[k].append(float((pred == y).mean()))
    return accs


def run(ctx: RunContext) -> Any:
    """The calibration comparison for every shipped Table-1 obfuscator; write ``calibration.csv``."""
    import torch

    from privcore.data import load_dataset
    from privcore.experiments.table1 import PARTS, table1_obfuscators
    from privcore.lipschitz import Certifier, certify_batch
    from privcore.nets.models import classify
    from privcore.train.release_aware import laplace_release_noise

    infos = {m.name: m for m in ctx.model_infos() if m.kind == "obfuscator"}
    variants = table1_obfuscators(ctx, infos)
    ds = load_dataset(ctx.dataset)
    n_all = ds.x_test.shape[0]
    n_test = ctx.n_test(full=None if n_all <= 1000 else 1000, quick=100, tiny=4)
    n_draws = ctx.pick(full=10, quick=5, tiny=2)
    idx = test_indices(n_all, n_test, ctx.seed)
    y = ds.y_test[idx].numpy()
    # the authors' protocol: every test image (a subsample in quick/tiny mode), Δp∞ from the first 101
    n_authors = ctx.pick(full=n_all, quick=min(n_all, 2000), tiny=min(n_all, 20))
    n_dp = min(n_all, ctx.pick(full=AUTHORS_DP_POINTS, quick=AUTHORS_DP_POINTS, tiny=4))
    a_draws = ctx.pick(full=AUTHORS_DRAWS, quick=AUTHORS_DRAWS, tiny=2)
    aidx = test_indices(n_all, n_authors, ctx.seed)
    y_all = ds.y_test[aidx].numpy()
    x_refit, y_train, refit_epochs = refit_plan(ctx, ds)
    config = {
        "variants": variants,
        "n_test": len(idx),
        "n_draws": n_draws,
        "authors_code": {
            "n_test": len(aidx),
            "n_draws": a_draws,
            "delta_p_points": f"the first {n_dp} test images, z = μ + σ·N(0, 1)",
            "delta_p": "μ + 3σ (np.std) of exact ℓ∞→ℓ∞ local constants at radius R",
            "noise": "Lap(Δp∞·R/ε), no test, every image",
            "classifiers": "authors-code: the obfuscator's own head; "
            "authors-code-release-clf: the release classifier",
            "source": "github.com/tremblerz/posthoc_privacy@66a8d35 experiment_automation.py:multi_eps",
        },
        "weights": {v: infos[v].card["weights"]["sha256"] for v in variants},
        "classifiers": ctx.classifier_weights(variants),
    }
    table = ctx.table("calibration", columns=COLUMNS, key=KEY, config=config, parts=PARTS)
    wanted = [("ours", e) for e in EPSILONS_OURS] + [("paper-text", e) for e in EPSILONS]
    wanted += [(c, e) for c in CALIBRATIONS[2:] for e in EPSILONS_AUTHORS]
    notes = dict((table.meta.get("notes") or {}).get("authors_delta_p_linf") or {})
    for v in variants:
        if all(table.done(obfuscator=v, calibration=c, epsilon=e) for c, e in wanted):
            continue
        pipe = ctx.pipeline(v)
        r, dp = pipe.radius, pipe.proposed_delta_p

        def add(cal: str, eps: float, dp_col: float, b: float, accs: list[float], refit: float | None,
                private: bool, n: int, draws: int, v: str = v, r: float = r) -> None:
            table.add(
                {
                    "dataset": ctx.dataset,
                    "obfuscator": v,
                    "calibration": cal,
                    "epsilon": eps,
                    "radius": r,
                    "delta_p": dp_col,
                    "noise_scale_mean": b,
                    "accuracy_mean": float(np.mean(accs)),
                    "accuracy_std": float(np.std(accs)),
                    "accuracy_refit": refit,
                    "private": private,
                    "n_draws": draws,
                    "n_test": n,
                }
            )

        # ours and the printed formula, on the test subsample
        todo = [(c, e) for c, e in wanted[: len(EPSILONS_OURS) + len(EPSILONS)]
                if not table.done(obfuscator=v, calibration=c, epsilon=e)]
        if todo:
            zt = pipe.obfuscate(torch.as_tensor(embed(pipe, ds.x_test[idx]), dtype=torch.float32)).cpu()
            zt_train = pipe.obfuscate(torch.as_tensor(embed(pipe, x_refit), dtype=torch.float32)).cpu()
            for cal, eps in todo:
                base, private = (dp * r, True) if cal == "ours" else (dp, r <= 1.0)
                b_value = base / eps
                b = torch.as_tensor(np.full(len(zt), base) / eps, dtype=torch.float32)[:, None]
                stream = _STREAM.get(cal, cal)
                gen = torch.Generator().manual_seed(row_seed(ctx.seed, "calibration", v, eps, stream))
                accs = []
                for _ in range(n_draws):
                    noisy = zt + laplace_release_noise(zt.shape, b, generator=gen)
                    accs.append(float((pipe.classify(noisy, b).argmax(-1).cpu().numpy() == y).mean()))
                refit = None
                if cal == "ours":
                    clf = refit_classifier(pipe, zt_train, y_train, scale=b_value, epochs=refit_epochs,
                                           seed=row_seed(ctx.seed, "calibration-refit", v, eps))
                    with torch.no_grad():
                        noisy = zt + laplace_release_noise(zt.shape, b, generator=gen)
                        pred = classify(clf, noisy.to(pipe.device), b_value).argmax(-1)
                        refit = float((pred.cpu().numpy() == y).mean())
                add(cal, eps, dp, b_value, accs, refit, private, len(y), n_draws)

        # the authors' code: Lap(Δp∞·R/ε), Δp∞ from test points, every image, no test
        todo = [e for e in EPSILONS_AUTHORS
                if not all(table.done(obfuscator=v, calibration=c, epsilon=e) for c in CALIBRATIONS[2:])]
        if todo:
            centers = _authors_centers(pipe, ds.x_test[:n_dp], row_seed(ctx.seed, "calibration-authors-z", v))
            linf = Certifier(kind="exact", time_limit=None, cache=True, output_norm="linf")
            kw = dict(workers=ctx.workers if n_dp > 32 else 1, progress=False, executor=ctx.executor)
            certs = certify_batch(copy.deepcopy(pipe.obfuscator).cpu(), centers, r, linf, **kw)
            stats = authors_delta_p_linf([c.upper for c in certs])
            stats["all_exact"] = all(c.exact for c in certs)
            notes[v] = stats
            dp_inf = stats["proposed"]
            zt_all = pipe.obfuscate(torch.as_tensor(embed(pipe, ds.x_test[aidx]), dtype=torch.float32)).cpu()
            classifiers = {"authors-code": _own_head(ctx, v), "authors-code-release-clf": pipe.classifier}
            for eps in todo:
                b_value = dp_inf * r / eps if math.isfinite(eps) else 0.0
                accs = _noisy_accuracy(zt_all, y_all, b_value, classifiers, a_draws,
                                       row_seed(ctx.seed, "calibration", v, eps, "authors-code"))
                for cal, a in accs.items():
                    if not table.done(obfuscator=v, calibration=cal, epsilon=eps):
                        add(cal, eps, dp_inf, b_value, a, None, False, len(y_all), len(a))
    frame = table.frame()
    figures = save_figure(_figure(frame, ctx.dataset), ctx.dataset_dir / "calibration")
    return table.finish(figures=figures, notes={"authors_delta_p_linf": notes})
