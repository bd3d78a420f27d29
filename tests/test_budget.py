"""privlens.budget: what one sent release spends at the sidebar's settings, and the warnings at
extreme settings (e^ε past e^10, δ ≥ 1e-3, δ ≥ 1/n, composition past a threshold)."""

from __future__ import annotations

import pytest

from privcore.mechanisms import GaussInput, Norm, Space, global_scales, ptr_scales
from privlens.budget import composition_warnings, extreme_warnings, spent_guarantee, spent_text
from privlens.settings import Settings


def test_the_slider_epsilon_is_the_total_ptr_runs_at_half_and_spends_it_with_half_delta() -> None:
    """Issue 31, item 4: the sidebar's ε is the total of a sent release's guarantee for every mechanism;
    PTR runs at ε/2, whose statement (2·ε/2, δ/2, R) (posthoc Thm 4.4) spends exactly that total."""
    s = Settings(mechanism="PTR", epsilon=3.0, delta=0.02, radius=0.3)
    assert s.mechanism_epsilon == 1.5
    g = spent_guarantee(s)
    assert (g.epsilon, g.delta, g.radius, g.space) == (3.0, 0.01, 0.3, Space.EMBEDDING)
    full = ptr_scales(epsilon=1.5, delta=0.02, radius=0.3, delta_p=7.0).guarantee  # Δp does not enter
    keys = ("epsilon", "delta", "radius", "space", "norm", "mechanism")
    assert [getattr(g, k) for k in keys] == [getattr(full, k) for k in keys]
    text = spent_text(s)
    assert "(ε, δ/2, R) = (3, 0.01, 0.3)" in text and "PTR runs at ε/2 = 1.5" in text
    assert "(2·ε/2, δ/2, R) = (3, 0.01, 0.3)" in text


def test_the_global_mechanism_spends_epsilon_and_no_delta_at_r() -> None:
    s = Settings(mechanism="Global", epsilon=3.0, delta=0.02, radius=0.3)
    g = spent_guarantee(s)
    assert (g.epsilon, g.delta, g.radius, g.space, g.norm) == (3.0, 0.0, 0.3, Space.EMBEDDING, Norm.LINF)
    full = global_scales(epsilon=3.0, radius=0.3, global_lipschitz=7.0).guarantee  # G does not enter
    keys = ("epsilon", "delta", "radius", "space", "norm", "mechanism")
    assert [getattr(g, k) for k in keys] == [getattr(full, k) for k in keys]
    assert "(ε, 0, R) = (3, 0, 0.3)" in spent_text(s)


def test_ip_mechanisms_spend_epsilon_delta_at_alpha() -> None:
    gi = spent_guarantee(Settings(mechanism="Gauss-Input", epsilon=1.0, delta=1e-5, alpha=0.1))
    assert (gi.epsilon, gi.delta, gi.radius, gi.norm) == (1.0, 1e-5, 0.1, Norm.L2)
    assert (gi.epsilon, gi.delta, gi.radius) == tuple(
        getattr(GaussInput(epsilon=1.0, delta=1e-5, alpha=0.1).guarantee, k)
        for k in ("epsilon", "delta", "radius")
    )
    lap = spent_guarantee(Settings(mechanism="Lap-Output", epsilon=2.0, alpha=0.5))
    assert (lap.epsilon, lap.delta, lap.norm) == (2.0, 0.0, Norm.L1)


@pytest.mark.parametrize(
    "eps,delta,n,expected",
    [
        (1.0, 1e-6, 1797, []),
        (40.0, 1e-6, None, ["ε = 40 is very large"]),  # the total: PTR at ε/2 = 20 spends 40, e^40
        (10.0, 1e-6, None, []),  # at the threshold, not past it
        (1.0, 0.05, None, ["δ = 0.025 is large"]),
        (1.0, 1e-3, 5000, ["δ = 0.0005 ≥ 1/n"]),  # δ/2 = 5e-4 < 1e-3 but ≥ 1/5000
        (1.0, 1e-3, 1797, []),  # 5e-4 < 1/1797
        (1.0, 1e-4, 1797, []),
    ],
)
def test_extreme_warnings(eps: float, delta: float, n: int | None, expected: list[str]) -> None:
    got = extreme_warnings(spent_guarantee(Settings(mechanism="PTR", epsilon=eps, delta=delta)), n=n)
    assert len(got) == len(expected), got
    for text, want in zip(got, expected, strict=True):
        assert want in text


def test_composition_warnings_follow_the_threshold() -> None:
    rows = [
        {
            "image": "a",
            "total": "per relation",
            "total ε = Σεᵢ": 12.0,
            "total δ = Σδᵢ": 0.1,
            "releases counted": "6 of 6",
        },
        {
            "image": "a",
            "total": "worst case",
            "total ε = Σεᵢ": 12.0,
            "total δ = Σδᵢ": 0.1,
            "releases counted": "6 of 6",
        },
        {
            "image": "b",
            "total": "worst case",
            "total ε = Σεᵢ": 2.0,
            "total δ = Σδᵢ": 0.0,
            "releases counted": "1 of 1",
        },
    ]
    assert [img for img, _ in composition_warnings(rows, threshold=10.0)] == ["a"]
    assert [img for img, _ in composition_warnings(rows, threshold=1.0)] == ["a", "b"]
    assert composition_warnings(rows, threshold=12.0) == []


@pytest.mark.parametrize("mechanism", ["Global", "PTR", "Gauss-Input", "Gauss-Output", "Lap-Output"])
@pytest.mark.parametrize("n", [1797, 70_000])  # the shipped datasets: digits and Fashion-MNIST
def test_the_default_settings_trigger_no_warning(mechanism: str, n: int) -> None:
    """Safe defaults (issue 30, item 5): δ = 1e-5 is below 1e-3 and below 1/n for both datasets."""
    s = Settings(mechanism=mechanism)
    assert s.delta == 1e-5 and extreme_warnings(spent_guarantee(s), n=n) == []
    assert "the noise is drawn when you send" in spent_text(s)


def test_worst_case_status_warns_only_near_or_over_the_threshold() -> None:
    """Far below the threshold an image's worst case is a plain status; from 80 % of it a warning;
    over it "over" (the over-budget error says so); δ ≥ 1 an error."""
    from privlens.budget import worst_case_status

    def row(image: str, eps: float, delta: float = 1e-5, total: str = "worst case") -> dict:
        return {"image": image, "total": total, "pairs": "pairs", "total ε = Σεᵢ": eps,
                "total δ = Σδᵢ": delta}

    totals = [row("a", 1.0, total="per relation"), row("a", 1.0), row("b", 8.0), row("c", 12.0),
              row("d", 1.0, 1.0)]
    levels = [(level, name) for level, name, _ in worst_case_status(totals, threshold=10.0)]
    assert levels == [("ok", "a"), ("warning", "b"), ("over", "c"), ("error", "d")]
    assert "80% of your threshold 10" in worst_case_status([row("b", 8.0)], threshold=10.0)[0][2]
