"""Training resume files hold no pickle (issue 30, item 6): a file planted in a models directory
runs no code, a state written for another configuration or network is ignored before any tensor
is read, and a genuine state still resumes exactly."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from privcore.data import load_dataset
from privcore.train.common import ResumableRun
from privcore.train.embedder import train_embedder
from privcore.train.recipes import embedder_recipe
from privcore.train.resume import ResumeStateWarning


class _Plant:
    """A pickle payload: unpickling it creates ``marker`` (standing in for arbitrary code)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return open, (str(self.marker), "w")


@pytest.fixture(scope="module")
def tiny() -> Any:
    return load_dataset("digits").subset(n_train=48, n_test=16, seed=0)


def _train(tiny: Any, out: Path) -> dict[str, Any]:
    rec = embedder_recipe("digits", epochs=1, hidden=8, batch_size=48)
    return train_embedder(tiny, rec, out=out, seed=0, progress=False, device="cpu")


def test_a_planted_pickle_resume_file_runs_no_code(tiny: Any, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    marker = tmp_path / "marker"
    stem = tmp_path / "digits" / "embedder"
    stem.parent.mkdir()
    old = Path(str(stem) + ".resume.pt")  # the old format's name: `privcore train` resumed from it
    torch.save({"config_hash": _Plant(marker)}, old)
    new = Path(str(stem) + ".resume.safetensors")
    new.write_bytes(old.read_bytes())  # the same payload under the new name: not a safetensors file
    with pytest.warns(ResumeStateWarning) as caught:
        card = _train(tiny, stem)
    assert not marker.exists()  # nothing was unpickled
    messages = [str(w.message) for w in caught]
    assert any(str(old) in m and "never loaded" in m for m in messages), messages
    assert any(str(new) in m and "starting from epoch 0" in m for m in messages), messages
    assert card["metrics"]["epochs_trained"] == 1  # a fresh run, which completed
    assert old.is_file() and not new.exists()  # the planted old file is left for the user to delete


def _objects(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Generator]:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, betas=(0.8, 0.9))
    return net, opt, torch.Generator().manual_seed(seed)


def _step(net: torch.nn.Module, opt: torch.optim.Optimizer, gen: torch.Generator) -> None:
    x = torch.randn(8, 3, generator=gen)
    loss = net(x).square().mean() + torch.rand(1).sum() * 0  # uses the global generator too
    opt.zero_grad()
    loss.backward()
    opt.step()


def test_a_genuine_state_reloads_equal(tmp_path: Path) -> None:
    net, opt, gen = _objects(0)
    for _ in range(3):
        _step(net, opt, gen)
    history = [{"epoch": 1, "loss": 0.5, "phase": "warmup"}, {"epoch": 2, "loss": float("nan")}]
    run = ResumableRun(tmp_path / "m", config={"lr": 1e-2, "recipe": {"hidden": 4}})
    run.save(2, {"net": net}, {"opt": opt}, gen, history)
    rng = torch.get_rng_state()
    torch.manual_seed(123)  # moves the global generator on

    net2, opt2, gen2 = _objects(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        epoch, hist2 = ResumableRun(tmp_path / "m", config={"recipe": {"hidden": 4}, "lr": 1e-2}).restore(
            {"net": net2}, {"opt": opt2}, gen2
        )
    assert epoch == 2 and json.dumps(hist2) == json.dumps(history)
    assert torch.equal(torch.get_rng_state(), rng) and torch.equal(gen2.get_state(), gen.get_state())
    for (k, a), (k2, b) in zip(net.state_dict().items(), net2.state_dict().items(), strict=True):
        assert k == k2 and a.dtype == b.dtype and torch.equal(a, b)
    s1, s2 = opt.state_dict(), opt2.state_dict()
    assert s1["param_groups"] == s2["param_groups"] and s2["param_groups"][0]["betas"] == (0.8, 0.9)
    for i, st in s1["state"].items():
        assert st.keys() == s2["state"][i].keys()
        assert all(torch.equal(st[k], s2["state"][i][k]) for k in st)
    _step(net, opt, gen)  # one more step from either state gives the same weights
    torch.set_rng_state(rng)
    _step(net2, opt2, gen2)
    assert all(torch.equal(a, b) for a, b in zip(net.parameters(), net2.parameters(), strict=True))
    assert not Path(str(tmp_path / "m") + ".resume.pt").exists()


def _untouched(net: torch.nn.Module, before: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(v, before[k]) for k, v in net.state_dict().items())


def test_another_configuration_or_network_starts_over_before_reading_a_tensor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import safetensors.torch

    net, opt, gen = _objects(0)
    _step(net, opt, gen)
    ResumableRun(tmp_path / "m", config={"lr": 1e-2, "seed": 0}).save(1, {"net": net}, {"opt": opt}, gen, [])

    def no_tensor_read(*_a: Any, **_k: Any) -> None:
        raise AssertionError("a tensor was read")

    monkeypatch.setattr(safetensors.torch, "load", no_tensor_read)
    net2, opt2, gen2 = _objects(1)
    before = {k: v.clone() for k, v in net2.state_dict().items()}
    with pytest.warns(ResumeStateWarning, match=r"another configuration \(differs in: seed\)"):
        got = ResumableRun(tmp_path / "m", config={"lr": 1e-2, "seed": 1}).restore(
            {"net": net2}, {"opt": opt2}, gen2
        )
    assert got == (0, []) and _untouched(net2, before)

    wide = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 2))
    before = {k: v.clone() for k, v in wide.state_dict().items()}
    opt3 = torch.optim.Adam(wide.parameters())
    with pytest.warns(ResumeStateWarning, match=r"net: 0\.weight has shape \[4, 3\].*\[5, 3\]"):
        got = ResumableRun(tmp_path / "m", config={"lr": 1e-2, "seed": 0}).restore(
            {"net": wide}, {"opt": opt3}, gen2
        )
    assert got == (0, []) and _untouched(wide, before)


@pytest.mark.parametrize(
    "edit",
    [
        lambda meta: meta.update(format="privcore.resume/0"),
        lambda meta: meta.update(epoch=-1),
        lambda meta: meta["optimizers"]["opt"].update(pickle="cos\nsystem\n"),
        lambda meta: meta.update(history=[{"loss": {"tensor": "m/net/0.weight"}}]),
    ],
)
def test_a_malformed_header_is_refused_with_a_warning(tmp_path: Path, edit: Any) -> None:
    import safetensors.torch

    net, opt, gen = _objects(0)
    _step(net, opt, gen)
    run = ResumableRun(tmp_path / "m", config={"lr": 1e-2})
    run.save(1, {"net": net}, {"opt": opt}, gen, [{"loss": 1.0}])
    with safetensors.safe_open(str(run.path), "pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    state = json.loads(meta["privcore.resume"])
    edit(state)
    safetensors.torch.save_file(tensors, str(run.path), metadata={"privcore.resume": json.dumps(state)})
    net2, opt2, gen2 = _objects(1)
    before = {k: v.clone() for k, v in net2.state_dict().items()}
    with pytest.warns(ResumeStateWarning, match=str(run.path)):
        assert run.restore({"net": net2}, {"opt": opt2}, gen2) == (0, [])
    assert _untouched(net2, before)


def test_a_truncated_state_is_refused_with_a_warning(tmp_path: Path) -> None:
    net, opt, gen = _objects(0)
    _step(net, opt, gen)
    run = ResumableRun(tmp_path / "m", config={"lr": 1e-2})
    run.save(1, {"net": net}, {"opt": opt}, gen, [{"loss": 1.0}])
    run.path.write_bytes(run.path.read_bytes()[:-4])  # header intact, the last tensor cut short
    net2, opt2, gen2 = _objects(1)
    before = {k: v.clone() for k, v in net2.state_dict().items()}
    with pytest.warns(ResumeStateWarning, match="starting from epoch 0"):
        assert run.restore({"net": net2}, {"opt": opt2}, gen2) == (0, [])
    assert _untouched(net2, before)
