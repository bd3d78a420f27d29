"""The ceiling and neighbours experiments: known answers on toy embeddings, then ``--tiny`` on digits."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.test_experiments import documented_columns


def test_neighbour_distances_and_shares_on_a_toy_line() -> None:
    from privcore.experiments.neighbours import neighbour_distances, neighbour_rows

    # reference: class 0 at x = 0, class 1 at x = 1 (second coordinate 0); R = 0.3
    z_ref = np.array([[0.0, 0.0], [1.0, 0.0]])
    y_ref = np.array([0, 1])
    # queries: near class 0 (0.1), near class 1 but labelled 0 (0.8), far from both (0.5, 5)
    z = np.array([[0.1, 0.0], [0.8, 0.0], [0.5, 5.0]])
    y = np.array([0, 0, 1])
    dist = neighbour_distances(z, y, z_ref, y_ref)
    np.testing.assert_allclose(dist.other, [0.9, 0.2, 5.0])
    np.testing.assert_allclose(dist.same, [0.1, 0.8, 5.0])
    assert dist.nearest_same.tolist() == [True, False, False]  # a tie counts as another class
    rows = {r["quantity"]: r for r in neighbour_rows(dist, 0.3)}
    assert rows["other_class_within_r"]["k"] == 1 and rows["other_class_within_r"]["n"] == 3
    assert rows["nearest_within_r_same_class"]["k"] == 1
    assert rows["any_within_r"]["k"] == 2 and rows["same_class_within_r"]["k"] == 1
    for r in rows.values():
        if r["k"] is not None:  # shares (three points give the median no 95 % interval)
            assert r["low"] <= r["value"] <= r["high"]
    from scipy.stats import binomtest

    ci = binomtest(1, 3).proportion_ci(method="exact")
    assert rows["other_class_within_r"]["low"] == pytest.approx(ci.low)
    assert rows["median_other_class_distance_over_r"]["value"] == pytest.approx(0.9 / 0.3)


def test_metric_dp_bound_of_two_points_is_the_randomised_response_optimum() -> None:
    """Two points of different classes at ℓ∞ distance D: no (ε/R)·ℓ∞-metric private release keeps more
    than e^a/(1 + e^a), a = εD/R, on average (randomised response attains it)."""
    from privcore.experiments.ceiling import metric_dp_bound

    z, y = np.array([[0.0, 0.0], [0.5, 0.1]]), np.array([0, 1])
    for eps in (0.5, 1.0, 4.0):
        a = eps * 0.5 / 0.5
        expected = math.exp(a) / (1 + math.exp(a))
        assert metric_dp_bound(z, y, epsilon=eps, radius=0.5) == pytest.approx(expected, abs=1e-6)
    # far apart: no constraint binds
    assert metric_dp_bound(np.array([[0.0], [100.0]]), y, epsilon=1.0, radius=0.5) == pytest.approx(1.0)


def test_metric_dp_bound_holds_for_the_identity_release() -> None:
    """The bound is above what a Laplace release of z (ℓ1 sensitivity d·R per ℓ∞ step R) keeps with the
    Bayes classifier of two known points."""
    from privcore.experiments.ceiling import metric_dp_bound

    z, y = np.array([[0.0, 0.0], [0.3, 0.3]]), np.array([0, 1])
    eps, r = 1.0, 0.5
    bound = metric_dp_bound(z, y, epsilon=eps, radius=r)
    rng = np.random.default_rng(0)
    b = 2 * r / eps  # the identity's G = d = 2
    noisy = z[:, None, :] + rng.laplace(0, b, size=(2, 20000, 2))
    dist = np.abs(noisy[..., None, :] - z[None, None]).sum(-1)  # ℓ1 to each point: the Laplace MAP rule
    acc = np.mean(dist.argmin(-1) == y[:, None])
    assert acc < bound


def test_identity_network_is_the_identity_with_g_equal_d() -> None:
    from privcore.experiments.ceiling import identity_network
    from privcore.lipschitz.global_box import ClipBox, certified_global_constant
    from privcore.mechanisms.global_mechanism import global_release

    box = ClipBox(lower=np.array([-2.0, -1.0, -3.0]), upper=np.array([2.0, 1.0, 0.5]))
    net = identity_network(box)
    c = certified_global_constant(net, box)
    assert c.value == pytest.approx(3.0, rel=1e-6) and c.value >= 3.0
    z = np.array([0.3, -0.7, 0.2])
    np.testing.assert_allclose(net.forward(z[None])[0], z, atol=1e-12)
    rel = global_release(net, z, epsilon=1e9, radius=0.1, constant=c, rng=0)
    np.testing.assert_allclose(rel.value, box.clip(z), atol=1e-6)


def _run(name: str, out: Path) -> pd.DataFrame:
    from privcore.cli import app

    result = CliRunner().invoke(
        app, ["experiment", name, "--dataset", "digits", "--tiny", "--out", str(out), "--no-progress"]
    )
    assert result.exit_code == 0, result.output + repr(result.exception)
    frame = pd.read_csv(out / "digits" / f"{name}.csv")
    assert list(frame.columns) == documented_columns(name)
    meta = json.loads((out / "digits" / f"{name}.json").read_text())
    assert meta["complete"] is True and meta["rows"] == len(frame) > 0
    return frame


@pytest.fixture(autouse=True)
def _no_png(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "lipschitz-cache"))
    monkeypatch.setenv("PRIVCORE_FIGURE_PNG", "0")


def test_ceiling_tiny_chooses_on_validation_and_reads_test_once(tmp_path: Path) -> None:
    frame = _run("ceiling", tmp_path)
    assert set(frame["estimator"]) == {"clean", "identity-global", "per-coordinate", "metric-dp-bound"}
    for (_, est, _eps), part in frame.groupby(["embedder", "estimator", "epsilon_total"]):
        test = part[part["split"] == "test"]
        assert len(test) == 1  # the test set is read once per estimator and ε
        if est != "metric-dp-bound":
            val = part[part["split"] == "validation"]
            chosen = val[val["selected"].astype(bool)]
            assert len(chosen) == 1 and chosen["accuracy"].iloc[0] == val["accuracy"].max()
            assert test["classifier"].iloc[0] == chosen["classifier"].iloc[0]
            assert (test["low"] <= test["accuracy"]).all() and (test["accuracy"] <= test["high"]).all()
    ident = frame[(frame["estimator"] == "identity-global") & (frame["split"] == "test")].iloc[0]
    # the identity's certified G is d: scale d·R/ε
    d_r = ident["latent_dim"] * ident["radius"]
    assert ident["noise_scale"] == pytest.approx(d_r / ident["epsilon_total"])
    per = frame[(frame["estimator"] == "per-coordinate") & (frame["split"] == "test")].iloc[0]
    assert per["noise_scale"] == pytest.approx(per["radius"] / per["epsilon_total"])
    bound = frame[frame["estimator"] == "metric-dp-bound"].iloc[0]
    assert bound["accuracy"] <= bound["high"] <= 1.0


def test_neighbours_tiny(tmp_path: Path) -> None:
    from privcore.experiments.neighbours import QUANTITIES

    frame = _run("neighbours", tmp_path)
    assert list(frame["quantity"]) == list(QUANTITIES)
    assert (frame["reference"] == "training").all()
    assert ((frame["low"] <= frame["value"]) & (frame["value"] <= frame["high"])).all()


def test_what_r_protects_reads_the_rows_of_one_embedder() -> None:
    from privcore.experiments.neighbours import neighbour_distances, neighbour_rows
    from privlens.results import what_r_protects

    dist = neighbour_distances(np.array([[0.1], [0.8], [3.0]]), np.array([0, 0, 0]),
                               np.array([[0.0], [1.0]]), np.array([0, 1]))
    meta = {"embedder_sha256": "abc", "radius": 0.3, "n_reference": 2}
    rows = [{**meta, **r} for r in neighbour_rows(dist, 0.3)]
    frame = pd.DataFrame(rows)
    assert what_r_protects(frame, "other") is None and what_r_protects(None, "abc") is None
    got = what_r_protects(frame, "abc")
    assert got is not None and len(got.table) == 5
    assert "1 of 3 test images" in got.lines[0]  # 0.8 has class 1 at 0.2 ≤ R
    assert "1 of 3 test images" in got.lines[1]  # 0.1: nearest is class 0 at 0.1
