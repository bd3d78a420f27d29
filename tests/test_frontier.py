"""Low-ε obfuscators for the global mechanism: tagged model names, the stated candidate grid, the
validation criterion, and the attack on global releases (``select-frontier``, ``attack-frontier``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.test_experiments import documented_columns

MODELS = Path(__file__).resolve().parents[1] / "models"


def test_a_tagged_global_name_parses_as_its_variant_and_names_the_recipe() -> None:
    from privcore.train.recipes import global_obfuscator_recipe, obfuscator_recipe, parse_obfuscator_name

    assert parse_obfuscator_name("N-global-e2o4") == ("N", "global")
    assert parse_obfuscator_name("ARL-N-global-e2") == ("ARL-N", "global")
    recipe = global_obfuscator_recipe("mnist", "N-global-e2o4", target_epsilon=2.0, out_dim=4)
    assert recipe.name == "N-global-e2o4" and recipe.noise_epsilons == (2.0, 4.0) and recipe.out_dim == 4
    assert obfuscator_recipe("mnist", "N-global").name == "N-global"
    for bad in ("C-global-e2", "N-global-E2", "N-paper-e2"):
        with pytest.raises(ValueError, match="variant"):
            parse_obfuscator_name(bad)
    with pytest.raises(ValueError, match="name_tag"):
        obfuscator_recipe("mnist", "N", name_tag="e2")  # only a global twin carries a tag


def test_the_grid_starts_with_the_shipped_default_recipe() -> None:
    """The first candidate is the shipped N-global's recipe exactly, so it is the baseline, not retrained."""
    from privcore.experiments.select_frontier import CANDIDATES
    from privcore.train.recipes import global_obfuscator_recipe

    name, (target, out_dim, _) = next(iter(CANDIDATES.items()))
    card = json.loads((MODELS / "mnist" / f"obfuscator-{name}.json").read_text())
    recipe = global_obfuscator_recipe("mnist", name, target_epsilon=target, out_dim=out_dim).to_json()
    assert {**recipe, **card["recipe"]} == recipe
    for c, (t, k, over) in CANDIDATES.items():  # every candidate is a `train global-model` recipe
        assert global_obfuscator_recipe("mnist", c, target_epsilon=t, out_dim=k, **over).name == c


def test_the_criterion_is_accuracy_at_two_then_four_then_grid_order() -> None:
    from privcore.experiments.select_frontier import _pick

    def rows(a2: float, a4: float) -> list[dict[str, float]]:
        return [{"epsilon_total": 2.0, "accuracy": a2}, {"epsilon_total": 4.0, "accuracy": a4}]

    assert _pick([("a", rows(0.5, 0.9)), ("b", rows(0.6, 0.1))]) == "b"
    assert _pick([("a", rows(0.5, 0.7)), ("b", rows(0.5, 0.8))]) == "b"
    assert _pick([("a", rows(0.5, 0.8)), ("b", rows(0.5, 0.8))]) == "a"


def test_attack_frontier_tiny_measures_each_model_at_equal_total_epsilon(tmp_path: Path) -> None:
    from privcore.cli import app

    args = ["experiment", "attack-frontier", "--dataset", "mnist", "--tiny", "--out", str(tmp_path),
            "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    frame = pd.read_csv(tmp_path / "mnist" / "attack-frontier.csv")
    assert list(frame.columns) == documented_columns("attack-frontier")
    assert list(frame["obfuscator"].unique()) == ["ARL-C-N", "N-global"]
    for _, part in frame.groupby("obfuscator"):
        assert sorted(part["epsilon_total"]) == [2.0, math.inf]
    assert (frame["mechanism"] == "Global").all() and (frame["n_eval"] == 4).all()
    finite = frame[frame["epsilon_total"] == 2.0]
    want = finite["global_lipschitz"] * finite["radius"] / 2.0
    assert finite["noise_scale"].tolist() == pytest.approx(want.tolist())
    for m in ("ssim", "psnr", "l1", "l2"):
        assert ((frame[f"{m}_lo"] <= frame[m]) & (frame[m] <= frame[f"{m}_hi"])).all(), m


@pytest.mark.slow  # minutes on two cores: it trains two candidate models (make test-slow)
def test_select_frontier_tiny_reads_the_test_set_once_for_the_selected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from privcore.cli import app

    monkeypatch.setenv("PRIVCORE_SELECT_DIR", str(tmp_path / "cache"))
    args = ["experiment", "select-frontier", "--dataset", "digits", "--tiny", "--out", str(tmp_path / "out"),
            "--workers", "1", "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    frame = pd.read_csv(tmp_path / "out" / "digits" / "select-frontier.csv")
    assert list(frame.columns) == documented_columns("select-frontier")
    val = frame[frame["choice"] == "obfuscator"]
    assert (val["split"] == "validation").all() and set(val["candidate"]) == {"N-global", "N-global-e2o2"}
    assert val[val["selected"]]["candidate"].nunique() == 1
    test = frame[frame["split"] == "test"]
    assert (test["choice"] == "final").all() and test["candidate"].nunique() == 1
    assert test["candidate"].iloc[0] == val[val["selected"]]["candidate"].iloc[0]
    assert sorted(test["epsilon_total"]) == [1.0, 2.0, 4.0, 10.0, 20.0]
    assert ((frame["low"] <= frame["accuracy"]) & (frame["accuracy"] <= frame["high"])).all()
    card = json.loads(next((tmp_path / "cache").rglob("obfuscator-N-global-e2o2.json")).read_text())
    assert card["name"] == "N-global-e2o2" and card["recipe"]["out_dim"] == 2
    assert card["recipe"]["noise_epsilons"] == [2.0, 4.0] and card["global_lipschitz"]["clip_box"]


def test_a_tagged_global_twin_is_explained_on_the_release_page() -> None:
    from privlens.glossary import model_help

    text = model_help("N-global-e2o2")
    assert "N-global-e2o2" in text and "Global mechanism" in text
    assert model_help("N-global").startswith("**N-global**")


def test_the_opening_rule_takes_the_smallest_useful_epsilon_and_the_best_shipped_model_there() -> None:
    from privcore.experiments.report_frontier import opening_view

    def row(c: str, e: float, acc: float, low: float) -> dict[str, object]:
        return {"choice": "obfuscator", "candidate": c, "epsilon_total": e, "accuracy": acc, "low": low,
                "high": acc + 0.02}

    frame = pd.DataFrame([row("a", 2.0, 0.60, 0.54), row("a", 4.0, 0.70, 0.68), row("a", 10.0, 0.9, 0.88),
                          row("b", 2.0, 0.58, 0.56), row("b", 4.0, 0.75, 0.73), row("b", 10.0, 0.6, 0.58),
                          row("c", 2.0, 0.99, 0.98), row("c", 4.0, 0.99, 0.98), row("c", 10.0, 0.99, 0.98)])
    # c is not shipped; at ε = 2 only b's interval clears u = 0.55, though a's point estimate is higher
    assert opening_view(frame, ["a", "b"]) == pytest.approx(
        {"epsilon": 2.0, "model": "b", "accuracy": 0.58, "low": 0.56, "high": 0.60, "level": 0.55})
    assert opening_view(frame, ["a"])["epsilon"] == 4.0
    tie = frame.copy()  # a tie at the opening ε: the higher accuracy at the largest ε (a: 0.9, b: 0.6)
    tie.loc[tie["epsilon_total"] == 2.0, ["accuracy", "low"]] = [0.7, 0.6]
    assert opening_view(tie, ["b", "a"])["model"] == "a"
    assert opening_view(frame[frame["candidate"] == "b"].assign(low=0.1), ["b"]) is None


def test_the_dashboard_opens_where_the_rule_picks_on_mnists_validation_rows() -> None:
    from privcore.defaults import OPENING_EPSILON, default_model
    from privcore.experiments.report_frontier import opening_view
    from privcore.models import list_models

    shipped = [m.name.removeprefix("obfuscator-") for m in list_models()
               if m.dataset == "mnist" and m.kind == "obfuscator" and not m.study_only]
    frame = pd.read_csv(MODELS.parent / "data" / "results" / "mnist" / "select-frontier.csv")
    pick = opening_view(frame, shipped)
    assert pick is not None and (pick["model"], pick["epsilon"]) == (default_model("mnist"), OPENING_EPSILON)


@pytest.mark.slow  # ~50 CPU-s: it trains a candidate and certifies its Δp and G (make test-slow)
def test_frontier_groupsort_tiny_reads_the_test_set_only_above_the_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from privcore.cli import app
    from privcore.experiments.frontier_groupsort import bar

    monkeypatch.setenv("PRIVCORE_SELECT_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out" / "digits"
    out.mkdir(parents=True)
    row = {"choice": "obfuscator", "candidate": "N-global-e2o2", "split": "validation", "epsilon_total": 2.0,
           "accuracy": -1.0, "selected": True}
    frontier = pd.DataFrame([row, {**row, "candidate": "N-global", "accuracy": 0.9, "selected": False}])
    frontier.to_csv(out / "select-frontier.csv", index=False)
    assert bar(frontier) == ("N-global-e2o2", -1.0) and bar(frontier.iloc[1:]) is None
    args = ["experiment", "frontier-groupsort", "--dataset", "digits", "--tiny",
            "--out", str(tmp_path / "out"), "--workers", "1", "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    frame = pd.read_csv(out / "frontier-groupsort.csv")
    assert list(frame.columns) == documented_columns("frontier-groupsort")
    val = frame[frame["choice"] == "family"]
    assert (val["split"] == "validation").all() and set(val["candidate"]) == {"N-global-e2o2gsl"}
    test = frame[frame["split"] == "test"]
    assert (test["choice"] == "final").all() and sorted(test["epsilon_total"]) == [1.0, 2.0, 4.0, 10.0, 20.0]
    card = json.loads(next((tmp_path / "cache").rglob("obfuscator-N-global-e2o2gsl.json")).read_text())
    widths = card["architecture"]["obfuscator"]["kwargs"]["widths"]
    assert widths[1:] == [24, 24, 2]  # the ReLU form of MaxMin (16, 16)
    assert 0.0 < card["global_lipschitz"]["value"] <= 1.0 + 1e-5  # certified, within the construction's 1


def test_the_groupsort_table_puts_the_bar_beside_the_family_and_says_whether_test_was_read() -> None:
    from privcore.experiments.report_frontier import render_groupsort

    res = MODELS.parent / "data" / "results" / "mnist"
    frame, frontier = pd.read_csv(res / "frontier-groupsort.csv"), pd.read_csv(res / "select-frontier.csv")
    text = render_groupsort(frame, frontier)
    assert "N-global-e2o2 (select-frontier's selection, the bar)" in text
    assert all(c in text for c in ("N-global-e2o2gs ", "N-global-e2o2gsw", "N-global-e2o2gsl"))
    assert ("read once for" in text) == bool((frame["choice"] == "final").any())
    no_test = render_groupsort(frame[frame["choice"] == "family"], frontier)
    assert "The test set was not read" in no_test and "read once for" not in no_test
