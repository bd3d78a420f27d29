"""The certified global mechanism (issue 31): the box, G over it, and f(clip z) + Lap(G·R/ε).

Soundness by brute force on tiny nets (G ≥ the largest Jacobian norm over sampled points and over every
activation pattern realised in the box, found by an independent LP per pattern), a fallback that never
reads inf, clipping, the scale, parameter errors, a card's hint that is too small, and a statistical
neighbour-pair audit (Clopper–Pearson; stated false-alarm rate)."""

from __future__ import annotations

import itertools
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import linprog

from privcore.errors import CheckpointError, ParameterError
from privcore.lipschitz import ReluNetwork, operator_norm
from privcore.lipschitz.bounds import jacobian_norms
from privcore.lipschitz.box_patterns import box_pattern_search
from privcore.lipschitz.global_box import (
    ClipBox,
    GlobalConstant,
    How,
    certified_global_constant,
    compute_global_constant,
    publish_bound,
    verify_global_constant,
)
from privcore.lipschitz.norms import DEFAULT_NORMS
from privcore.lipschitz.rounding import CertifiedNet, sensitivity_with_rounding
from privcore.mechanisms import (
    card_global_constant,
    card_global_hint,
    discrete_laplace_integers,
    global_release,
    global_scales,
)
from privcore.mechanisms.sampling import RandomBits
from privcore.nets.card_schema import GLOBAL_HOWS, check_card
from tests._nets import random_net

ROOT = Path(__file__).resolve().parents[1]


def _box(seed: int, d: int) -> ClipBox:
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-1.5, -0.2, d)
    return ClipBox(lo, lo + rng.uniform(0.3, 2.5, d))  # a different width per coordinate: not a cube


def _realised_max(net: ReluNetwork, box: ClipBox) -> float:
    """max ‖J_D‖ over the patterns whose closed region meets the box: every pattern, one scipy LP each
    (the reference: independent of the engine's region rows and pattern tables)."""
    widths = net.hidden_widths
    best = 0.0
    for flat in itertools.product((0.0, 1.0), repeat=sum(widths)):
        pats = np.split(np.array(flat), np.cumsum(widths)[:-1])
        rows, rhs = [], []
        A, a = np.eye(net.in_dim), np.zeros(net.in_dim)
        jac = np.eye(net.in_dim)
        for w, b, p in zip(net.weights[:-1], net.biases[:-1], pats, strict=True):
            P, p0 = w @ A, w @ a + b
            s = np.where(p > 0, 1.0, -1.0)
            rows.append(-s[:, None] * P)  # s·(P x + p0) ≥ 0
            rhs.append(s * p0)
            A, a = p[:, None] * P, p * p0
            jac = p[:, None] * (w @ jac)
        res = linprog(np.zeros(net.in_dim), A_ub=np.vstack(rows), b_ub=np.concatenate(rhs),
                      bounds=list(zip(box.lower, box.upper, strict=True)), method="highs")
        if res.status == 0:
            best = max(best, float(operator_norm(net.weights[-1] @ jac)))
    return best


@pytest.mark.parametrize("seed", [0, 1])
def test_exact_g_brute_force(seed: int) -> None:
    net = random_net(seed, (3, 5, 4, 2))
    box = _box(seed, 3)
    g = compute_global_constant(net, box, time_limit=20)
    assert g.how is How.EXACT and g.source == "computed" and math.isfinite(g.value)
    ref = _realised_max(net, box)
    assert ref <= g.value <= publish_bound(ref * (1 + 1e-7))  # exact, up to publication's rounding up
    pts = np.random.default_rng(seed).uniform(box.lower, box.upper, size=(20000, 3))
    vals, _ = jacobian_norms(net, pts, DEFAULT_NORMS)
    assert vals.max() <= g.value
    assert g.lower <= ref + 1e-9  # the witness is a verified lower bound
    # the enumeration itself, from far below: every pattern above ref/2 visited in order, LPs on the box
    search = box_pattern_search(net, box.lower, box.upper, ref / 2, DEFAULT_NORMS)
    assert search.passed is False and abs(search.value - ref) <= 1e-9 * ref
    assert box_pattern_search(net, box.lower, box.upper, ref * (1 + 1e-6), DEFAULT_NORMS).passed is True
    # the box's own value, not the covering cube's
    center, radius = box.covering_cube()
    assert np.all(center - radius <= box.lower) and np.all(center + radius >= box.upper)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_all_pattern_bound_is_above_every_realised_pattern(seed: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31: where the box's enumeration does not apply (hidden layers wider than 12), two hidden
    layers get the all-pattern bound of the chord branch and bound (a first decision at twice the
    witness, then lower). Forced here on a tiny net by switching the enumeration off: the bound is never
    below the largest norm of a pattern realised in the box (one LP each), nor below the Jacobian norms
    at sampled points, nor below the largest pattern the box's stable neurons allow (it is that maximum,
    up to the search's last step)."""
    import privcore.lipschitz.global_box as gb
    from privcore.lipschitz.bounds import forward_bounds
    from privcore.lipschitz.patterns import global_pattern_table, stable_masks

    monkeypatch.setattr(gb, "box_pattern_search", lambda *args, **kwargs: None)
    net = random_net(seed, (3, 5, 4, 2))
    box = _box(seed, 3)
    g = compute_global_constant(net, box, time_limit=5)
    ref = _realised_max(net, box)
    pts = np.random.default_rng(seed).uniform(box.lower, box.upper, size=(20000, 3))
    vals, _ = jacobian_norms(net, pts, DEFAULT_NORMS)
    assert 0 < g.lower <= ref + 1e-9 and max(ref, float(vals.max())) <= g.value
    on, off = stable_masks(forward_bounds(net, box.lower, box.upper))
    table = global_pattern_table(net, DEFAULT_NORMS)
    bits = (table.codes[:, None] >> np.arange(net.n_hidden)) & 1
    allowed = (bits[:, on] == 1).all(axis=1) & (bits[:, off] == 0).all(axis=1)
    truth = float(table.norms[allowed].max())  # ≥ ref: every realised pattern is allowed
    all_patterns = g.bounds.get("all-patterns", math.inf)
    assert truth <= all_patterns
    if truth < g.bounds["interval"] * 0.99:  # then the search brackets the all-pattern maximum
        assert all_patterns <= truth * 1.002 + 1e-9 and g.value <= publish_bound(all_patterns)


@pytest.mark.parametrize("seed,max_nodes", [(6, 20), (2, 5), (4, 1)])
def test_decisions_that_run_out_leave_a_bound_above_every_allowed_pattern(
        seed: int, max_nodes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The all-pattern search with decisions cut short by a node budget (each then leaves its open
    nodes' bound, and the next threshold goes up): the bound is still above the largest norm of every
    pattern the box's stable neurons allow (brute force over all patterns), and G above it. The first
    threshold is put at the pattern floor, so that the first decisions cannot pass within the budget."""
    import privcore.lipschitz.global_box as gb
    from privcore.lipschitz.bounds import forward_bounds
    from privcore.lipschitz.patterns import global_pattern_table, stable_masks

    monkeypatch.setattr(gb, "box_pattern_search", lambda *args, **kwargs: None)
    for name, value in (("_FIRST_RATIO", 0.0), ("_FLOOR_MARGIN", 1.0), ("_FIRST_MARGIN", 1.0)):
        monkeypatch.setattr(gb, name, value)
    net = random_net(seed, (3, 6, 5, 2))
    box = _box(seed, 3)
    g = compute_global_constant(net, box, time_limit=5, max_nodes=max_nodes)
    on, off = stable_masks(forward_bounds(net, box.lower, box.upper))
    table = global_pattern_table(net, DEFAULT_NORMS)
    bits = (table.codes[:, None] >> np.arange(net.n_hidden)) & 1
    allowed = (bits[:, on] == 1).all(axis=1) & (bits[:, off] == 0).all(axis=1)
    truth = float(table.norms[allowed].max())
    assert truth <= g.bounds.get("all-patterns", math.inf) and _realised_max(net, box) <= g.value


@pytest.mark.parametrize("seed", [0, 1])
def test_an_exact_engine_value_carries_the_engines_witness(seed: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the box's enumeration does not apply and the engine's split search on a cube box is exact,
    the verified witness of G is the one that search ended with (within its 1e-6 gap), not the first
    witness search's: forced here by a first search that only evaluates the box's centre. Brute force:
    the witness never exceeds the largest realised pattern, G never falls below it."""
    import privcore.lipschitz.global_box as gb

    def centre_only(net, box, **_):
        x = (box.lower + box.upper) / 2.0
        vals, ok = jacobian_norms(net, x[None], DEFAULT_NORMS)
        return (float(vals[0]) * (1 - 1e-12), x) if ok[0] else (-math.inf, None)

    monkeypatch.setattr(gb, "box_pattern_search", lambda *args, **kwargs: None)
    monkeypatch.setattr(gb, "box_witness", centre_only)
    net = random_net(seed, (3, 5, 4, 2))
    box = ClipBox(np.full(3, -1.0), np.full(3, 1.0))
    g = compute_global_constant(net, box, time_limit=10)
    ref = _realised_max(net, box)
    assert g.how is How.EXACT and ref <= g.value <= publish_bound(ref * (1 + 2e-6))
    assert ref * (1 - 2e-6) <= g.lower <= ref + 1e-9
    assert g.lower > centre_only(net, box)[0]


def test_fallback_never_inf() -> None:
    net = random_net(3, (4, 16, 16, 3))  # 16-wide layers: no pattern table, the enumeration does not apply
    box = _box(3, 4)
    g = compute_global_constant(net, box, time_limit=0.05, max_nodes=1)  # all-patterns gives up at once
    # out of nodes, the all-pattern search still returns its open nodes' certified bound (never inf)
    assert g.how in (How.INTERVAL, How.ALL_PATTERNS) and math.isfinite(g.value)
    assert g.value <= g.bounds["interval"]
    pts = np.random.default_rng(0).uniform(box.lower, box.upper, size=(20000, 4))
    vals, _ = jacobian_norms(net, pts, DEFAULT_NORMS)
    assert g.value >= max(float(vals.max()), g.lower) > 0
    more = compute_global_constant(net, box, time_limit=3.0, max_nodes=1)  # the engine's split search too
    assert math.isfinite(more.value) and more.lower <= more.value <= g.value
    assert more.how in (How.SPLIT_BOUND, How.CUBE_EXACT, How.MILP_BOUND, How.INTERVAL, How.ALL_PATTERNS)


def _sum_net() -> ReluNetwork:
    """f(x) = relu(x₁) + relu(x₂): ‖J‖∞→1 = 2 where both are active."""
    return ReluNetwork.from_arrays([np.eye(2), np.ones((1, 2))], [np.zeros(2), np.zeros(1)])


def test_clipping_keeps_neighbours_and_the_scale() -> None:
    box = ClipBox([-1.0, -1.0], [1.0, 1.0])
    rng = np.random.default_rng(0)
    z = rng.uniform(-4, 4, size=(5000, 2))
    zp = z + rng.uniform(-0.3, 0.3, size=z.shape)
    cz = np.array([box.clip(v) for v in z])
    czp = np.array([box.clip(v) for v in zp])
    assert np.all(np.abs(cz - czp).max(axis=1) <= np.abs(z - zp).max(axis=1))
    assert np.all((cz >= -1) & (cz <= 1))
    net = _sum_net()
    g = certified_global_constant(net, box)
    outside, inside = np.array([3.0, -0.5]), np.array([1.0, -0.5])
    a = global_release(net, outside, epsilon=1.0, radius=0.25, constant=g, rng=7)
    b = global_release(net, inside, epsilon=1.0, radius=0.25, constant=g, rng=7)
    assert np.array_equal(a.value, b.value)  # exactly f(clip z) + the same noise
    assert a.noise_scale_effective == b.noise_scale_effective and a.sensitivity == b.sensitivity


def test_scale_is_g_r_over_epsilon_rounded_up() -> None:
    net = random_net(0, (3, 5, 4, 2))
    g = certified_global_constant(net, _box(0, 3))
    rel = global_release(net, np.zeros(3), epsilon=0.7, radius=0.3, constant=g, rng=1)
    eta = math.ldexp(g.value * 0.3, -24)
    assert rel.global_lipschitz == g.value and rel.noise_scale == g.value * 0.3 / 0.7
    assert rel.sensitivity == sensitivity_with_rounding(lipschitz=g.value, radius=0.3, rounding=eta)
    assert g.value * 0.3 < rel.sensitivity <= g.value * 0.3 * (1 + 3e-7)
    assert rel.sensitivity / 0.7 <= rel.noise_scale_effective <= rel.sensitivity / 0.7 * (1 + 1e-8)
    assert rel.guarantee.epsilon == 0.7 and rel.guarantee.delta == 0.0 and rel.guarantee.radius == 0.3
    scales = global_scales(epsilon=0.7, radius=0.3, global_lipschitz=g.value, numel=2)
    assert scales.noise_scale_effective == rel.noise_scale_effective
    assert rel.parameters()["clip_box"] == g.box.to_dict() and rel.parameters()["global_lipschitz"] == g.value


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"radius": 0.0}, "radius"),
        ({"radius": float("nan")}, "radius"),
        ({"z": np.zeros(3)}, "z"),
    ],
)
def test_bad_parameters_name_the_parameter(kwargs: dict, name: str) -> None:
    net = _sum_net()
    g = certified_global_constant(net, ClipBox([-1.0, -1.0], [1.0, 1.0]))
    args = {"z": np.zeros(2), "epsilon": 1.0, "radius": 0.25, **kwargs}
    z = args.pop("z")
    with pytest.raises(ParameterError) as err:
        global_release(net, z, constant=g, **args)
    msg = str(err.value)
    assert msg.startswith(name) and ("must be in" in msg or "must have shape" in msg)


def test_bad_boxes() -> None:
    with pytest.raises(ParameterError, match=r"clip_box.lower must be ≤ clip_box.upper.*coordinate 1"):
        ClipBox([0.0, 1.0], [1.0, 0.5])
    with pytest.raises(ParameterError, match=r"clip_box\.upper"):
        ClipBox([0.0, 0.0], [1.0, float("nan")])
    with pytest.raises(ParameterError, match="one length"):
        ClipBox([0.0, 0.0], [1.0])
    with pytest.raises(ParameterError, match=r"box has 3 coordinates.*allowed: 2"):
        compute_global_constant(_sum_net(), ClipBox([0.0] * 3, [1.0] * 3))
    box = ClipBox.from_points(np.array([[0.0, 1.0], [2.0, -1.0]]), margin=0.5)
    assert box.to_dict() == {"lower": [-0.5, -1.5], "upper": [2.5, 1.5]}


def test_uncertified_constants_are_refused() -> None:
    net = _sum_net()
    box = ClipBox([-1.0, -1.0], [1.0, 1.0])
    forged = GlobalConstant(value=1e-3, how=How.EXACT, lower=0.0, box=box, model_digest=net.digest,
                            source="computed", seconds=0.0)
    with pytest.raises(TypeError, match="certified in this process"):
        global_release(net, np.zeros(2), epsilon=1.0, radius=0.25, constant=forged)
    other = certified_global_constant(random_net(5, (2, 3, 1)), box)
    with pytest.raises(ValueError, match="not for f"):
        global_release(net, np.zeros(2), epsilon=1.0, radius=0.25, constant=other)


def test_a_card_hint_that_is_too_small_is_not_used() -> None:
    net = random_net(1, (3, 5, 4, 2))
    box = _box(1, 3)
    exact = compute_global_constant(net, box)
    assert verify_global_constant(net, box, exact.value) is not None  # a stored exact G verifies
    small = exact.value * 0.6
    assert verify_global_constant(net, box, small) is None
    card = {"global_lipschitz": {"value": small, "how": "exact", "clip_box": box.to_dict()}}
    got = card_global_constant(net, card)
    assert got.source == "computed" and got.value == exact.value
    rel = global_release(net, np.zeros(3), epsilon=1.0, radius=0.2, constant=got, rng=0)
    assert rel.global_lipschitz == exact.value and rel.noise_scale == exact.value * 0.2
    loose_card = {"global_lipschitz": {"value": exact.value * 1.5, "clip_box": box.to_dict()}}
    loose = card_global_constant(net, loose_card)
    assert loose.source == "verified-hint" and loose.value == exact.value * 1.5
    assert card_global_constant(net, loose_card) is loose  # memoised


@pytest.mark.parametrize("hint", [0, 0.0, -1.0, math.nan, math.inf, -math.inf, "5.0", True, None, [5.0],
                                  pytest.param(10**400, id="huge-int")])
def test_a_bad_card_hint_is_no_hint(hint) -> None:
    net = random_net(1, (3, 5, 4, 2))
    box = _box(1, 3)
    card = {"global_lipschitz": {"value": hint, "how": "exact", "clip_box": box.to_dict()}}
    assert card_global_hint(card) is None
    got = card_global_constant(net, card)
    assert got.source == "computed" and got.value == compute_global_constant(net, box).value


def test_a_good_card_hint_is_read_as_a_float() -> None:
    assert card_global_hint({"global_lipschitz": {"value": 3}}) == 3.0
    assert card_global_hint({"global_lipschitz": {"value": 2.5e-3}}) == 2.5e-3
    assert card_global_hint({}) is None and card_global_hint({"global_lipschitz": None}) is None


def test_weights_changed_in_place_after_a_release_are_certified_again() -> None:
    """A module's identity is remembered per process, never trusted: after its last layer is doubled in
    place (through ``.data``, which leaves torch's version counters alone), the constant certified before
    is refused for it, and the card's G, now too small, fails verification: G is computed again for the
    network as it now is (twice the first), and so is the noise."""
    import torch

    torch.manual_seed(3)
    f = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    box = _box(3, 3)
    card = {"global_lipschitz": {"value": compute_global_constant(f, box).value, "clip_box": box.to_dict()}}
    z = np.array([0.1, -0.2, 0.3])
    before = card_global_constant(f, card)
    first = global_release(f, z, epsilon=1.0, radius=0.2, constant=before, rng=0)
    assert before.source == "verified-hint"
    f[2].weight.data.mul_(2.0)
    f[2].bias.data.mul_(2.0)
    with pytest.raises(ValueError, match="not for f"):
        global_release(f, z, epsilon=1.0, radius=0.2, constant=before, rng=0)
    after = card_global_constant(f, card)
    assert after.source == "computed" and after.model_digest != before.model_digest
    second = global_release(f, z, epsilon=1.0, radius=0.2, constant=after, rng=0)
    assert second.global_lipschitz == pytest.approx(2 * first.global_lipschitz, rel=1e-6)
    assert second.noise_scale == pytest.approx(2 * first.noise_scale, rel=1e-6)


def _clopper_pearson_eps(k1: int, k0: int, n: int, alpha: float) -> float:
    """ln(p₁_lower / p₀_upper), one-sided (1 − α/2) Clopper–Pearson bounds on each probability."""
    p1_low = stats.beta.ppf(alpha / 2, k1, n - k1 + 1) if k1 else 0.0
    p0_high = stats.beta.ppf(1 - alpha / 2, k0 + 1, n - k0) if k0 < n else 1.0
    return math.log(p1_low / p0_high) if p1_low > 0 else -math.inf


def test_neighbour_pair_audit() -> None:
    """Worst-case pair of f = relu(x₁) + relu(x₂) on [−1, 1]², R = 0.25: z = (0.5, 0.5), z' = (0.75,
    0.75), |f(z) − f(z')| = 0.5 = G·R. The event Y > f(z') has probability ratio e^ε exactly; with
    n = 100 000 draws each, the Clopper–Pearson lower bound on ε exceeds the true ε with probability
    ≤ α = 1e-3 (the false-alarm rate; the seed is fixed, so the test is deterministic). The same audit
    catches a release with half the noise (lower bound ≈ 2ε)."""
    net, box, eps, r, n, alpha = _sum_net(), ClipBox([-1.0, -1.0], [1.0, 1.0]), 1.0, 0.25, 100_000, 1e-3
    g = certified_global_constant(net, box)
    z, zp = np.array([0.5, 0.5]), np.array([0.75, 0.75])
    rel = global_release(net, z, epsilon=eps, radius=r, constant=g, rng=0)
    plan, bits = rel.plan, RandomBits(12345)
    cnet = CertifiedNet.from_layers([(net.weights[0], net.biases[0]), None, (net.weights[1], net.biases[1])])
    f0, f1 = float(cnet(box.clip(z))[0]), float(cnet(box.clip(zp))[0])
    assert f1 - f0 == 0.5
    t = f1

    def draws(center: float, grid_scale: int) -> np.ndarray:  # what add_noise computes, n at once
        noise = discrete_laplace_integers(grid_scale, n, bits).astype(np.float64)
        return plan.grid * (np.rint(center / plan.grid) + noise)

    for scale, bound in ((int(plan.grid_scale), eps), (int(plan.grid_scale) // 2, None)):
        k1 = int((draws(f1, scale) > t).sum())
        k0 = int((draws(f0, scale) > t).sum())
        low = _clopper_pearson_eps(k1, k0, n, alpha)
        if bound is not None:
            assert 0.9 * eps < low <= eps  # sharp, and never above ε
        else:
            assert low > 1.5 * eps  # half the noise is caught


def test_card_schema_accepts_the_block_and_refuses_bad_ones() -> None:
    assert GLOBAL_HOWS == tuple(h.value for h in How)
    card = json.loads((ROOT / "models/digits/obfuscator-N.json").read_text())
    card.pop("global_lipschitz", None)
    check_card(card)  # a card without the block loads
    good = {"value": 1.9, "how": "exact", "lower": 1.8, "seconds": 0.2, "bounds": {"exact": 1.9},
            "clip_box": {"lower": [-1.0, 0.0], "upper": [1.0, 0.0], "margin": 0.5, "n": 10}}
    check_card({**card, "global_lipschitz": good})
    for hint in (0, -1.0, math.nan, math.inf, "1.9", None, True, [math.nan], {"g": math.nan}):
        check_card({**card, "global_lipschitz": {**good, "value": hint}})  # a bad hint is ignored, not fatal
    check_card({**card, "global_lipschitz": {k: v for k, v in good.items() if k != "value"}})
    for bad, field in [
        ({**good, "how": "guess"}, "global_lipschitz.how"),
        ({**good, "clip_box": {"lower": [1.0], "upper": [0.0]}}, "global_lipschitz.clip_box"),
        ({**good, "clip_box": {"lower": [0.0, 0.0], "upper": [1.0]}}, "global_lipschitz.clip_box"),
        ({**good, "clip_box": {"lower": "0", "upper": [1.0]}}, "global_lipschitz.clip_box"),
        ({k: v for k, v in good.items() if k != "clip_box"}, "global_lipschitz.clip_box"),
    ]:
        with pytest.raises(CheckpointError, match=field.replace(".", r"\.")):
            check_card({**card, "global_lipschitz": bad})


def test_shipped_card_verifies_and_the_command_rewrites_it(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from privcore.cli.global_constant import global_app
    from privcore.nets.checkpoint import load_checkpoint, read_card

    src = ROOT / "models/digits"
    if "global_lipschitz" not in json.loads((src / "obfuscator-N.json").read_text()):
        pytest.skip("the shipped cards carry no global_lipschitz block yet")
    obf = load_checkpoint(src / "obfuscator-N", kind="obfuscator")
    got = card_global_constant(obf["obfuscator"], obf.card)
    assert got.source == "verified-hint" and got.value == obf.card["global_lipschitz"]["value"]
    center = (got.box.lower + got.box.upper) / 2
    rel = global_release(obf["obfuscator"], center, epsilon=1.0, radius=0.35, constant=got, rng=0)
    assert rel.value.shape == (8,) and rel.global_lipschitz == got.value and rel.how == "exact"
    (tmp_path / "digits").mkdir()
    for name in ("obfuscator-N.json", "obfuscator-N.safetensors", "embedder.json", "embedder.safetensors"):
        shutil.copy(src / name, tmp_path / "digits" / name)
    runner = CliRunner()
    args = ["--dataset", "digits", "--variant", "N", "--models-dir", str(tmp_path)]
    res = runner.invoke(global_app, ["compute", *args, "--time-limit", "20"])
    assert res.exit_code == 0, res.output
    block = read_card(tmp_path / "digits/obfuscator-N")["global_lipschitz"]
    assert block["how"] == "exact" and block["value"] == obf.card["global_lipschitz"]["value"]
    assert block["clip_box"] == obf.card["global_lipschitz"]["clip_box"]
    res = runner.invoke(global_app, ["verify", *args])
    assert res.exit_code == 0 and "verified (exact)" in res.output


def test_concurrent_callers_share_one_computation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second thread asking for the same (model, box) while the first computes waits for that result
    (the dashboard's warm-up and its first page), and a failed computation is not remembered."""
    import threading

    import privcore.lipschitz.global_box as gb

    net, box = random_net(11, (2, 4, 2)), _box(11, 2)
    started, release, calls = threading.Event(), threading.Event(), []
    real = gb.compute_global_constant

    def slow(*args: object, **kwargs: object) -> GlobalConstant:
        calls.append(1)
        started.set()
        assert release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(gb, "compute_global_constant", slow)
    got: list[GlobalConstant] = []
    first = threading.Thread(target=lambda: got.append(certified_global_constant(net, box)))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=lambda: got.append(certified_global_constant(net, box)))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waiting, not computing a second time
    release.set()
    first.join(10)
    second.join(10)
    assert len(calls) == 1 and len(got) == 2 and got[0] is got[1]

    def failing(*args: object, **kwargs: object) -> GlobalConstant:
        raise RuntimeError("solver gone")

    other = _box(12, 2)
    monkeypatch.setattr(gb, "compute_global_constant", failing)
    with pytest.raises(RuntimeError, match="solver gone"):
        certified_global_constant(net, other)
    monkeypatch.setattr(gb, "compute_global_constant", real)
    assert certified_global_constant(net, other).value > 0  # computed afresh, not a remembered failure
