"""Each experiment runs in ``--tiny`` mode on the embedded digits and writes the documented CSV.

The expected columns are those of ``data/results/README.md`` (parsed here, so the README and the
code cannot drift apart).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

README = Path(__file__).resolve().parents[1] / "data" / "results" / "README.md"


def documented_columns(name: str) -> list[str]:
    """Column names listed in the README table of ``<name>.csv``."""
    text = README.read_text(encoding="utf-8")
    section = text.split(f"## `{name}.csv`", 1)[1].split("\n## ", 1)[0]
    cols: list[str] = []
    for line in section.splitlines():
        m = re.match(r"\| ((?:`[a-z0-9_]+`(?:, )?)+) \|", line)
        if m:
            cols += re.findall(r"`([a-z0-9_]+)`", m.group(1))
    return cols


def _run_cli(name: str, out: Path) -> pd.DataFrame:
    from privcore.cli import app

    result = CliRunner().invoke(
        app, ["experiment", name, "--dataset", "digits", "--tiny", "--out", str(out), "--no-progress"]
    )
    assert result.exit_code == 0, result.output + repr(result.exception)
    frame = pd.read_csv(out / "digits" / f"{name}.csv")
    assert list(frame.columns) == documented_columns(name)
    meta = json.loads((out / "digits" / f"{name}.json").read_text())
    assert meta["complete"] is True and meta["config"]["mode"] == "tiny"
    assert meta["rows"] == len(frame) > 0
    assert (out / "digits" / f"{name}.html").is_file()
    return frame


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("results")


def test_audit_tiny_no_claim_refuted_and_the_laplace_control_caught(out: Path) -> None:
    frame = _run_cli("audit", out)
    honest = frame[~frame["control"]]
    assert set(honest["mechanism"]) == {
        "Lap-Output",
        "Gauss-Output",
        "Gauss-Input",
        "LDP-Image",
        "LDP-Embedding",
        "PTR",
        "Global",
        "Global-Gauss",
    }
    # each "passed" has a false-alarm rate ≤ 5 % (the audit's confidence); seeded, so deterministic
    assert honest["passed"].all()
    assert (honest["epsilon_lb"] <= honest["epsilon_claimed"]).all()
    lap = frame[frame["mechanism"] == "Lap-Output (half noise)"].iloc[0]
    assert not lap["passed"] and lap["epsilon_lb"] > 1.0
    # PTR's worst case goes beyond ε: the factor 2 of Theorem 4.4 is really needed
    ptr = honest[honest["mechanism"] == "PTR"].iloc[0]
    assert ptr["epsilon_claimed"] == 2.0 and ptr["epsilon_lb"] > 1.0


def test_audit_rerun_resumes_without_recomputing(out: Path) -> None:
    before = (out / "digits" / "audit.csv").read_text()
    from privcore.experiments import run_experiment
    from privcore.experiments.runner import RunContext

    ctx = RunContext(dataset="digits", mode="tiny", out_dir=out, show_progress=False)
    frame = run_experiment("audit", ctx)
    assert (out / "digits" / "audit.csv").read_text() == before
    assert len(frame) == len(pd.read_csv(out / "digits" / "audit.csv"))


def test_fig4_tiny_times_every_sweep(out: Path) -> None:
    frame = _run_cli("fig4", out)
    assert set(frame["sweep"]) == {"radius", "input_dim", "depth"}
    assert frame["seconds_mean"].notna().all() and (frame["n_timeouts"] == 0).all()  # timings: bench/
    assert frame["lipmip_seconds_mean"].gt(0).all() and (frame["lipmip_timeouts"] == 0).all()
    assert frame["solver"].str.len().gt(0).all()
    for prefix in ("seconds", "lipmip_seconds"):  # the 95 % t-interval of each mean brackets it
        lo, mean, hi = frame[f"{prefix}_lo"], frame[f"{prefix}_mean"], frame[f"{prefix}_hi"]
        assert (frame["n"] == 2).all() and ((0 <= lo) & (lo <= mean) & (mean <= hi)).all()
    base = frame[frame["sweep"] == "radius"]
    assert (base["input_dim"] == 8).all()  # the digits latent dimension


def test_fig4_t_interval_of_the_mean() -> None:
    import math

    from privcore.experiments.fig4 import t_interval

    lo, hi = t_interval([10.0, 11.0, 12.0])  # 11 ± t(0.975, 2)·1/√3 = 11 ± 2.4841
    assert math.isclose(lo, 11 - 2.48414, abs_tol=1e-4) and math.isclose(hi, 11 + 2.48414, abs_tol=1e-4)
    assert t_interval([0.1, 0.2, 5.0])[0] == 0.0  # clipped: a time is never negative
    assert all(math.isnan(v) for v in t_interval([1.0]))


# --------------------------------------------------------------------------- experiments on shipped models


def _shipped_digits() -> Path | None:
    from privcore.models.pipeline import default_models_dir

    d = default_models_dir() / "digits"
    need = ("embedder", "obfuscator-ARL-C-N", "ip-cnn", "ip-lipschitz-l1", "ip-lipschitz-l2")
    return d.parent if all((d / f"{n}.json").is_file() for n in need) else None


@pytest.fixture(scope="module")
def shipped(out: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    models = _shipped_digits()
    if models is None:
        pytest.skip("the shipped digits checkpoints (models/digits) are not in this tree yet")
    return models


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Certificates and φ go to a throw-away cache: tests never read or fill the user's."""
    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "lipschitz-cache"))
    # HTML only: kaleido would start a Chromium per figure (~5 s each); test_experiments_runner
    # covers the PNG export itself
    monkeypatch.setenv("PRIVCORE_FIGURE_PNG", "0")


def test_table1_tiny(out: Path, shipped: Path) -> None:
    frame = _run_cli("table1", out)
    assert (frame["obfuscator"] == "ARL-C-N").all()
    inf = frame[np.isinf(frame["epsilon"])].iloc[0]
    assert inf["release_rate"] == 1.0 and inf["noise_scale"] == 0.0
    ptr = frame[np.isfinite(frame["epsilon"])]
    # the release calibration Lap(Δp·R/ε) (as the authors' code scales; not the printed Lap(Δp/ε))
    expected = ptr["delta_p"] * ptr["radius"] / ptr["epsilon"]
    np.testing.assert_allclose(ptr["noise_scale"], expected, rtol=1e-12)
    # ⊥ as a uniform guess: accuracy = (hits + n_⊥/K)/n, never below the ⊥-wrong reading
    k = 10
    n, rel = ptr["n_test"], ptr["n_released"]
    np.testing.assert_allclose(ptr["accuracy"], ptr["accuracy_bot_wrong"] + (n - rel) / n / k, rtol=1e-12)
    assert ((ptr["release_rate"] >= 0) & (ptr["release_rate"] <= 1)).all()
    assert (ptr["delta"] == 0.05).all()


def test_table1_global_tiny(out: Path, shipped: Path) -> None:
    """Issue 31: every image released, the scale G·R/ε of the G this process certified (equal to the
    card's value, which verified), an interval around the accuracy, and the noise ratio against PTR."""
    import json

    frame = _run_cli("table1-global", out)
    card = json.loads((shipped / "digits" / "obfuscator-ARL-C-N.json").read_text())
    row = frame.iloc[0]
    assert row["obfuscator"] == "ARL-C-N" and row["mechanism"] == "global" and row["release_rate"] == 1.0
    assert row["delta"] == 0.0 and row["global_lipschitz"] == card["global_lipschitz"]["value"]
    assert row["noise_scale"] == pytest.approx(row["global_lipschitz"] * row["radius"] / row["epsilon_total"])
    assert row["noise_ratio_vs_ptr"] == pytest.approx(row["global_lipschitz"] / (2 * row["delta_p"]))
    assert row["low"] <= row["accuracy"] <= row["high"]


def test_table1_row_does_not_depend_on_which_other_variants_ran(shipped: Path, tmp_path: Path) -> None:
    """Issue 19: a variant's noise seed comes from (variant, ε), not its position in --obfuscators."""
    from privcore.cli import app

    frames = []
    for chosen in ("ARL-C-N", "C-N,ARL-C-N"):
        out = tmp_path / chosen
        args = ["experiment", "table1", "--dataset", "digits", "--tiny", "--out", str(out), "--no-progress",
                "--obfuscators", chosen]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output + repr(result.exception)
        frames.append(pd.read_csv(out / "digits" / "table1.csv"))
    alone, both = frames[0], frames[1]
    assert set(both["obfuscator"]) == {"C-N", "ARL-C-N"} and set(alone["obfuscator"]) == {"ARL-C-N"}
    same = both[both["obfuscator"] == "ARL-C-N"].reset_index(drop=True)
    pd.testing.assert_frame_equal(same, alone.reset_index(drop=True))  # noise seeds and numbers alike


def test_table1_adds_one_obfuscator_and_keeps_the_others_rows(shipped: Path, tmp_path: Path) -> None:
    """Each obfuscator is a part of the table: --obfuscators C-N after a run of ARL-C-N adds C-N's
    rows, leaves ARL-C-N's as they were and records the second run as an addition."""
    from privcore.cli import app

    out = tmp_path / "results"
    for chosen in ("ARL-C-N", "C-N"):
        args = ["experiment", "table1", "--dataset", "digits", "--tiny", "--out", str(out), "--no-progress",
                "--obfuscators", chosen]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output + repr(result.exception)
        if chosen == "ARL-C-N":
            first = pd.read_csv(out / "digits" / "table1.csv")
    both = pd.read_csv(out / "digits" / "table1.csv")
    assert list(dict.fromkeys(both["obfuscator"])) == ["ARL-C-N", "C-N"]
    pd.testing.assert_frame_equal(both[both["obfuscator"] == "ARL-C-N"].reset_index(drop=True), first)
    meta = json.loads((out / "digits" / "table1.json").read_text())
    assert meta["config"]["variants"] == ["ARL-C-N", "C-N"] and meta["complete"]
    assert [a["parts"] for a in meta["added"]] == [["C-N"]]


def test_table2_tiny(out: Path, shipped: Path) -> None:
    frame = _run_cli("table2", out)
    assert set(frame["method"]) == {"LDP-Image", "LDP-Embedding", "Adversarial"}
    img = frame[(frame["method"] == "LDP-Image") & (frame["epsilon"] == 1.0)].iloc[0]
    assert img["noise_scale"] == 64.0  # d/ε for 8×8 digits
    # the rows are the registry's mechanisms: LDP-Embedding's scale is its outlook's 2Bk/ε, B computed here
    from privcore.mechanisms import registry

    mech = registry.get("LDP-Embedding")
    look = mech.outlook(mech.load(dataset="digits", model="ARL-C-N", models_dir=str(shipped)),
                        mech.setting(epsilon=1.0))
    emb = frame[(frame["method"] == "LDP-Embedding") & (frame["epsilon"] == 1.0)].iloc[0]
    assert emb["noise_scale"] == look.noise_scale and look.guarantee.all_pairs


def test_attack_tiny(out: Path, shipped: Path) -> None:
    frame = _run_cli("attack", out)
    assert set(frame["radius"]) == {0.4}
    ok = frame[frame["n_eval"] > 0]
    assert ((ok["ssim"] <= 1) & (ok["l2"] >= 0) & (ok["l1"] >= 0)).all()
    # PSNR = 10 log10(1/MSE) is a mean of per-image values, so ≥ 10 log10(1/mean MSE) (Jensen)
    assert (ok["psnr"] >= 10 * np.log10(1 / ok["l2"]) - 1e-9).all()
    np.testing.assert_allclose(ok["psnr_paper"] - ok["psnr"], 20 * np.log10(255), rtol=1e-12)
    for m in ("ssim", "psnr", "l1", "l2"):  # every cell: a 95 % interval around its mean, and the floor
        assert (ok[f"{m}_lo"] <= ok[m] + 1e-12).all() and (ok[m] <= ok[f"{m}_hi"] + 1e-12).all()
        assert ok[f"{m}_floor"].notna().all()


def test_attack_bootstrap_interval_covers_the_mean_at_its_level() -> None:
    """Coverage of the percentile bootstrap on skewed SSIM-like scores (n = 60, 400 trials, seed 0).

    With 95 % nominal coverage, fewer than 340/400 covering would happen with probability < 1e-6
    under a coverage of 0.93 (the percentile bootstrap undercovers a little at small n).
    """
    from privcore.experiments.attack import bootstrap_interval

    rng = np.random.default_rng(0)
    a, b = 5.0, 2.0
    truth = a / (a + b)
    covered = sum(lo <= truth <= hi for lo, hi in (
        bootstrap_interval(rng.beta(a, b, size=60), seed=k) for k in range(400)))
    assert covered >= 340
    assert bootstrap_interval(np.array([0.5]), seed=0) == (0.5, 0.5)
    lo, hi = bootstrap_interval(np.array([np.nan, np.nan]), seed=0)
    assert np.isnan(lo) and np.isnan(hi)


def test_fig2_tiny(out: Path, shipped: Path) -> None:
    frame = _run_cli("fig2", out)
    assert (frame["lipschitz_lower_mean"] <= frame["lipschitz_mean"] + 1e-9).all()
    # balls nest: per obfuscator the constant cannot shrink as r grows
    for _, part in frame.groupby("obfuscator"):
        assert part.sort_values("radius")["lipschitz_mean"].is_monotonic_increasing


def test_fig3_tiny(out: Path, shipped: Path) -> None:
    frame = _run_cli("fig3", out)
    centre = frame[frame["sign"] == 0]
    assert (centre["pixel_l2"] == 0).all() and np.allclose(centre["ssim_to_centre"], 1.0)
    assert (out / "digits" / "fig3.png").is_file()
    # further along the same axis is never closer in latent space; its picture differs from the centre
    assert (frame[frame["sign"] != 0]["pixel_l2"] > 0).all()


def test_ip_tiny(out: Path, shipped: Path) -> None:
    frame = _run_cli("ip", out)
    assert {"Gauss-Input", "Gauss-Output", "Lap-Output", "none"} <= set(frame["mechanism"])
    assert ((frame["accuracy_mean"] >= 0) & (frame["accuracy_mean"] <= 1)).all()
    gout = frame[frame["mechanism"] == "Gauss-Output"]
    assert (gout["lipschitz"] > 0).all() and (gout["delta"] == 1e-5).all()
    # ε < 1: the classic calibration beside the analytic one, with more noise (Balle & Wang 2018)
    grid = frame[(frame["sweep"] == "grid") & frame["mechanism"].str.startswith("Gauss")]
    assert (grid["epsilon"] < 1).all() and set(grid["calibration"]) == {"analytic", "classic"}
    for _, pair in grid.groupby(["model", "mechanism"]):
        noise = pair.set_index("calibration")["noise"]
        assert noise["classic"] > noise["analytic"] > 0
    assert set(frame.loc[frame["epsilon"] >= 1, "calibration"].dropna()) <= {"analytic"}
    # every cell carries its 95 % bootstrap interval over test images, around the mean
    assert frame[["accuracy_lo", "accuracy_hi"]].notna().all().all()
    assert (frame["accuracy_lo"] <= frame["accuracy_mean"]).all()
    assert (frame["accuracy_mean"] <= frame["accuracy_hi"]).all()
    assert (frame["accuracy_hi"] > frame["accuracy_lo"]).any()
    # Fig. 5: Gauss-Output only, accuracy against ε for each α
    fig5 = frame[frame["sweep"] == "fig5"]
    assert set(fig5["mechanism"]) == {"Gauss-Output"}
    assert fig5[fig5["calibration"] == "analytic"].groupby("alpha")["epsilon"].nunique().min() >= 2


def test_report_puts_paper_numbers_beside_ours(out: Path) -> None:
    from privcore.cli import app

    result = CliRunner().invoke(
        app, ["experiment", "report", "--dataset", "fashion-mnist", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "_not run yet_" in result.output  # nothing run for fashion-mnist in this temporary tree
    from privcore.experiments.report import render_table1

    frame = pd.DataFrame(
        {
            "obfuscator": ["ARL-C-N", "ARL-C-N"],
            "epsilon": [float("inf"), 1.0],
            "accuracy": [0.8, 0.5],
            "release_rate": [1.0, 0.95],
        }
    )
    md = render_table1(frame, "fashion-mnist")
    assert "| ARL-C-N | 0.800 (0.706) | 0.500 [95%] (0.371) | – (0.554) |" in md


def test_calibration_tiny(out: Path, shipped: Path) -> None:
    frame = _run_cli("calibration", out)
    ours = frame[frame["calibration"] == "ours"].set_index("epsilon")
    text = frame[frame["calibration"] == "paper-text"].set_index("epsilon")
    assert set(text.index) == {1.0, 2.0, 5.0, 10.0} and max(ours.index) == 100.0
    # b = Δp·R/ε (ours) and Δp/ε (the paper's printed text): 1/R times the noise
    np.testing.assert_allclose(ours["noise_scale_mean"], ours["delta_p"] * ours["radius"] / ours.index)
    shared = ours.loc[text.index]
    np.testing.assert_allclose(text["noise_scale_mean"], shared["noise_scale_mean"] / shared["radius"])
    assert ours["private"].all() and ours["accuracy_refit"].notna().all()
    # the authors' code: Lap(Δp∞·R/ε) with ε ∈ {1, 2, 5, 10, ∞}, every image, never private
    for cal in ("authors-code", "authors-code-release-clf"):
        authors = frame[frame["calibration"] == cal].set_index("epsilon")
        assert set(authors.index) == {1.0, 2.0, 5.0, 10.0, np.inf} and not authors["private"].any()
        finite = authors.loc[[1.0, 2.0, 5.0, 10.0]]
        np.testing.assert_allclose(finite["noise_scale_mean"],
                                   finite["delta_p"] * finite["radius"] / finite.index)
        assert authors.loc[np.inf, "noise_scale_mean"] == 0.0 and authors.loc[np.inf, "n_draws"] == 1
        assert (authors["n_test"] > ours["n_test"].max()).all()  # more images than the subsample
    meta = json.loads((out / "digits" / "calibration.json").read_text())
    stats = meta["notes"]["authors_delta_p_linf"]["ARL-C-N"]
    assert stats["proposed"] == pytest.approx(stats["mu"] + 3 * stats["sigma"])
    dp_inf = frame.loc[frame["calibration"] == "authors-code", "delta_p"].iloc[0]
    assert stats["proposed"] == pytest.approx(dp_inf)


def test_authors_delta_p_is_mean_plus_three_population_sd() -> None:
    from privcore.experiments.calibration import authors_delta_p_linf

    stats = authors_delta_p_linf([1.0, 2.0, 3.0, 4.0])
    # np.array(lip_vals).std() in the authors' privacy_estimation.py: ddof = 0
    assert stats["sigma"] == pytest.approx(np.std([1.0, 2.0, 3.0, 4.0]))
    assert stats["proposed"] == pytest.approx(2.5 + 3 * np.sqrt(1.25)) and stats["n"] == 4
    with pytest.raises(ValueError):
        authors_delta_p_linf([1.0])


def test_a_quick_or_tiny_run_never_writes_the_committed_results(
    shipped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --out, --quick/--tiny results go to the quick-results directory (issue 15: `experiment all
    --quick` had overwritten the committed full table1.csv)."""
    from privcore._paths import results_dir
    from privcore.cli import app

    committed = results_dir() / "digits" / "table2.csv"
    before = committed.read_bytes() if committed.exists() else None
    monkeypatch.setenv("PRIVCORE_QUICK_RESULTS_DIR", str(tmp_path / "quick"))
    args = ["experiment", "table2", "--dataset", "digits", "--tiny", "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert (tmp_path / "quick" / "digits" / "table2.csv").is_file()
    assert "committed results are untouched" in result.output
    assert (committed.read_bytes() if committed.exists() else None) == before


def test_select_tiny_chooses_on_validation_and_reads_the_test_set_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 15: candidates train on training-minus-validation into the select cache (not models/),
    one candidate per choice is selected, and only the selected pair has test rows."""
    from privcore.cli import app

    monkeypatch.setenv("PRIVCORE_SELECT_DIR", str(tmp_path / "cache"))
    args = ["experiment", "select", "--dataset", "digits", "--tiny", "--out", str(tmp_path / "out"),
            "--certifier", "interval", "--workers", "1", "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    frame = pd.read_csv(tmp_path / "out" / "digits" / "select.csv")
    assert list(frame.columns) == documented_columns("select")
    meta = json.loads((tmp_path / "out" / "digits" / "select.json").read_text())
    split = meta["config"]["validation_split"]
    assert split["fraction"] == 0.1 and split["n_fit"] + split["n_val"] == split["n_train_total"]
    assert len(split["held_out_sha256"]) == 64 and meta["complete"] is True
    for choice in ("release_margin", "classifier_schedule"):
        part = frame[frame["choice"] == choice]
        assert (part["split"] == "validation").all()
        assert part[part["selected"]]["candidate"].nunique() == 1
    test = frame[frame["split"] == "test"]
    assert (test["choice"] == "final").all() and test["selected"].all() and test["candidate"].nunique() == 1
    assert ((frame["accuracy_lo"] <= frame["accuracy"]) & (frame["accuracy"] <= frame["accuracy_hi"])).all()
    sel = meta["notes"]["selected"]
    assert test["release_margin"].iloc[0] == sel["release_margin"]
    cards = list((tmp_path / "cache").rglob("obfuscator-ARL-C-N.json"))
    assert len(cards) == 2
    card = json.loads(cards[0].read_text())
    assert card["dataset"]["n_train"] == split["n_fit"] and card["dataset"]["options"]["validation"]


@pytest.mark.slow  # about a minute on two cores: it trains five candidate models (make test-slow)
def test_select_global_tiny_chooses_on_validation_and_reads_the_test_set_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31: the global mechanism's obfuscator (incl. one trained with its own noise) and
    classifier schedule are chosen on validation; only the selected pair is read on test, and each
    candidate's G is certified over a box of its fit embeddings."""
    from privcore.cli import app

    monkeypatch.setenv("PRIVCORE_SELECT_DIR", str(tmp_path / "cache"))
    args = ["experiment", "select-global", "--dataset", "digits", "--tiny", "--out", str(tmp_path / "out"),
            "--certifier", "interval", "--workers", "1", "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    frame = pd.read_csv(tmp_path / "out" / "digits" / "select-global.csv")
    assert list(frame.columns) == documented_columns("select-global")
    meta = json.loads((tmp_path / "out" / "digits" / "select-global.json").read_text())
    assert meta["complete"] is True
    for choice in ("obfuscator", "classifier_schedule"):
        part = frame[frame["choice"] == choice]
        assert (part["split"] == "validation").all()
        assert part[part["selected"]]["candidate"].nunique() == 1
    assert set(frame[frame["choice"] == "obfuscator"]["obfuscator"]) == {"ARL-C-N", "N-global"}
    test = frame[frame["split"] == "test"]
    assert (test["choice"] == "final").all() and test["selected"].all() and test["candidate"].nunique() == 1
    assert sorted(test["epsilon_total"]) == [2.0, 4.0, 10.0, 20.0]
    assert ((frame["low"] <= frame["accuracy"]) & (frame["accuracy"] <= frame["high"])).all()
    assert (frame["release_rate"] == 1.0).all() and (frame["global_lipschitz"] > 0).all()
    cards = list((tmp_path / "cache").rglob("obfuscator-N-global.json"))
    assert len(cards) == 1
    card = json.loads(cards[0].read_text())
    assert card["recipe"]["noise_mode"] == "global" and card["global_lipschitz"]["clip_box"]
    assert card["recipe"]["noise_box_samples"] == 512 and "public box" in card["loss"]["noise"]
    assert card["dataset"]["options"]["validation"]


def test_attack_global_tiny(out: Path) -> None:
    from privcore.cli import app

    result = CliRunner().invoke(app, ["experiment", "attack-global", "--dataset", "mnist", "--tiny", "--out",
                                      str(out), "--no-progress"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    frame = pd.read_csv(out / "mnist" / "attack-global.csv")
    assert list(frame.columns) == documented_columns("attack-global")
    assert list(frame["epsilon_total"]) == [2.0, float("inf")] and set(frame["model"]) == {"N-global"}
    for m in ("ssim", "psnr", "l1", "l2", "baseline_ssim", "baseline_l2"):
        assert ((frame[f"{m}_low"] <= frame[m]) & (frame[m] <= frame[f"{m}_high"])).all()
