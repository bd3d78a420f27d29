"""Accounting identities (IP paper Props 1–4, Vadhan Lemma 2.2) and the privacy ledger."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest

from privcore.accounting import (
    PrivacyLedger,
    basic_composition,
    chaining,
    chaining_hops,
    group_privacy,
    parallel_composition,
    post_processing,
)
from privcore.mechanisms import ANY_METRIC, GaussInput, Guarantee, LDPImage

L2 = "ℓ2 on the input"


def g(eps: float = 0.3, delta: float = 1e-5, radius: float = 0.1, metric: str = L2) -> Guarantee:
    return Guarantee(epsilon=eps, delta=delta, radius=radius, metric=metric)


@pytest.mark.parametrize("n", [1, 2, 7, 100])
@pytest.mark.parametrize("compose", [basic_composition, parallel_composition])
def test_n_copies_compose_to_n_eps_n_delta(n: int, compose) -> None:
    total = compose([g()] * n)
    assert total.epsilon == pytest.approx(n * 0.3, rel=1e-15) and total.epsilon >= math.fsum([0.3] * n)
    assert total.delta == pytest.approx(n * 1e-5, rel=1e-15) and total.delta >= math.fsum([1e-5] * n)
    assert total.radius == 0.1 and total.metric == L2


def test_composition_takes_the_smallest_radius_and_sums_budgets() -> None:
    total = basic_composition([g(0.1, 1e-6, 0.5), g(0.2, 2e-6, 0.05), g(0.4, 0.0, 0.2)])
    assert total.radius == 0.05
    assert total.epsilon == pytest.approx(0.7) and total.delta == pytest.approx(3e-6)


def test_composition_refuses_mixed_metrics_but_accepts_all_pairs_guarantees() -> None:
    with pytest.raises(ValueError, match="different neighbourhood metrics"):
        basic_composition([g(metric=L2), g(metric="ℓ∞ on the embedding z")])
    mixed = basic_composition([g(), LDPImage(epsilon=1.0).guarantee])
    assert mixed.metric == L2 and mixed.radius == 0.1 and mixed.epsilon == pytest.approx(1.3)
    with pytest.raises(ValueError, match="at least one"):
        basic_composition([])
    with pytest.raises(TypeError, match="Guarantee"):
        basic_composition([g(), (1.0, 0.0)])  # type: ignore[list-item]


def test_delta_is_capped_at_one_and_then_called_vacuous() -> None:
    total = basic_composition([g(delta=0.6), g(delta=0.6)])
    assert total.delta == 1.0 and total.vacuous and "No protection" in total.describe()


def test_post_processing_is_the_identity() -> None:
    base = g()
    assert post_processing(base) is base


@pytest.mark.parametrize("eps", [0.3, 2.0])
def test_chaining_at_beta_equal_alpha_is_the_identity(eps: float) -> None:
    base = GaussInput(epsilon=eps, delta=1e-5, alpha=0.1).guarantee
    assert chaining(base, 0.1) == base


@pytest.mark.parametrize(
    "eps,delta,alpha,beta", [(0.3, 1e-5, 0.1, 0.35), (1.0, 1e-12, 0.05, 1.0), (0.01, 1e-6, 1.0, 9.5)]
)
def test_chaining_matches_the_direct_geometric_sum(
    eps: float, delta: float, alpha: float, beta: float
) -> None:
    """δ_h = Σ_{i<h} e^{iε}·δ (Appendix D, Eq. 33), which exceeds the main text's misprinted h·δ."""
    h = math.ceil(Fraction(beta) / Fraction(alpha))
    chained = chaining(g(eps, delta, alpha), beta)
    direct = math.fsum(math.exp(i * eps) * delta for i in range(h))
    assert chained.delta == pytest.approx(direct, rel=1e-12) and chained.delta >= direct
    assert chained.epsilon == pytest.approx(h * eps) and chained.epsilon >= h * eps
    assert chained.radius == beta
    assert chained.delta > h * delta


def test_chaining_hops_never_undercount_float_fuzz() -> None:
    assert chaining_hops(0.1, 0.3) == 3  # 0.3/0.1 = 2.9999999999999996 in floats
    assert chaining_hops(0.1, 0.1 + 0.2) == 4  # 0.30000000000000004 really is above 3·0.1
    assert chaining_hops(0.1, 0.7) == 7
    assert chaining_hops(0.5, 0.25) == 1
    assert chaining_hops(1.0, 3.0000000001) == 4
    for alpha, beta in [(0.1, 0.3), (0.07, 0.49), (1 / 3, 1.0), (0.2, 0.6000000000000001)]:
        assert chaining_hops(alpha, beta) * Fraction(alpha) >= Fraction(beta)  # h·α covers β exactly


def test_chaining_overflow_gives_a_vacuous_but_true_delta() -> None:
    assert chaining(g(eps=5.0, delta=1e-5, radius=0.1), 30.0).delta == 1.0
    lap = chaining(g(eps=1.0, delta=0.0), 0.5)
    assert lap.delta == 0.0 and lap.epsilon == pytest.approx(5.0)
    everywhere = LDPImage(epsilon=1.0).guarantee
    assert chaining(everywhere, 100.0) == everywhere


def test_group_privacy_identity_formula_and_chaining_is_tighter() -> None:
    base = g(eps=0.5, delta=1e-6, radius=0.1)
    assert group_privacy(base, 1) == base
    grouped = group_privacy(base, 4)
    assert grouped.epsilon == pytest.approx(2.0)
    assert grouped.delta == pytest.approx(4 * math.exp(3 * 0.5) * 1e-6, rel=1e-12)
    assert grouped.radius == pytest.approx(0.4)
    assert chaining(base, 0.4).delta <= grouped.delta
    with pytest.raises(ValueError, match="k"):
        group_privacy(base, 0)


def test_ledger_totals_entries_and_round_trip() -> None:
    a = GaussInput(epsilon=0.5, delta=1e-5, alpha=0.1).guarantee
    b = GaussInput(epsilon=0.25, delta=1e-6, alpha=0.05).guarantee
    ledger = PrivacyLedger()
    assert len(ledger) == 0 and ledger.total().epsilon == 0.0 and ledger.total().all_pairs
    ledger = ledger.add(a, label="first image").add(b, label="second image")
    assert [e.label for e in ledger.entries] == ["first image", "second image"]
    total = ledger.total()
    assert (
        total.epsilon == pytest.approx(0.75) and total.delta == pytest.approx(1.1e-5) and total.radius == 0.05
    )
    data = ledger.to_dicts()
    assert json.loads(json.dumps(data)) == data
    assert PrivacyLedger.from_dicts(data) == ledger
    with pytest.raises(ValueError, match="label"):
        ledger.add(a, label="")


def test_ledger_totals_by_metric_keep_neighbourhoods_apart() -> None:
    ledger = (
        PrivacyLedger()
        .add(g(0.5, 1e-5, 0.1, L2), label="ip")
        .add(g(1.0, 0.025, 0.5, "ℓ∞ on the embedding z"), label="ptr")
        .add(LDPImage(epsilon=2.0).guarantee, label="ldp")
    )
    with pytest.raises(ValueError, match="different neighbourhood metrics"):
        ledger.total()
    totals = ledger.totals_by_metric()
    assert set(totals) == {L2, "ℓ∞ on the embedding z"}
    assert totals[L2].epsilon == pytest.approx(2.5)
    assert totals["ℓ∞ on the embedding z"].delta == pytest.approx(0.025)
    assert ANY_METRIC not in totals


@pytest.mark.parametrize(
    "kwargs,exc",
    [
        ({"epsilon": -0.1}, ValueError),
        ({"delta": 1.5}, ValueError),
        ({"radius": 0.0}, ValueError),
        ({"epsilon": math.nan}, ValueError),
        ({"metric": 3}, TypeError),
    ],
)
def test_guarantee_validates_itself(kwargs: dict, exc: type) -> None:
    base = {"epsilon": 1.0, "delta": 0.0, "radius": 1.0}
    with pytest.raises(exc):
        Guarantee(**{**base, **kwargs})
