"""The mechanism protocol: every registered mechanism releases through one API, CLI and document, ε is
the total of the sent release's guarantee on each, and only certifications this process made are used."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

import privcore
from privcore.errors import ParameterError
from privcore.mechanisms import registry
from privcore.mechanisms.protocol import Mechanism, Outlook


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    from sklearn.datasets import load_digits

    return load_digits().images[3] / 16


def _extra(mech: Mechanism) -> dict[str, float]:
    return {"alpha": 0.5} if "alpha" in mech.parameter_names else {}


@pytest.mark.parametrize("name", registry.names())
def test_every_mechanism_releases_with_the_total_epsilon_in_its_document(name: str, image) -> None:
    mech = registry.get(name)
    assert registry.get(name.lower()) is registry.get(name.upper()) is mech
    out = privcore.release(image, dataset="digits", mechanism=name.lower(), epsilon=3.0, delta=1e-6,
                           rng=np.random.default_rng(1), **_extra(mech))
    doc = json.loads(json.dumps(out.document(), ensure_ascii=False))
    assert doc["mechanism"] == mech.name and doc["guarantee"]["mechanism"] == mech.name
    assert doc["guarantee"]["epsilon"] == 3.0 == doc["parameters"]["epsilon"]
    expected_delta = {"PTR": 5e-7}.get(name, 1e-6 if mech.uses_delta else 0.0)
    assert doc["guarantee"]["delta"] == pytest.approx(expected_delta, rel=1e-12)
    radius = {"radius": 0.5} if "radius" in mech.parameter_names else {}
    spent = mech.spent(mech.setting(epsilon=3.0, delta=1e-6, **radius, **_extra(mech)))
    if spent.all_pairs:  # local DP: every pair of inputs, in strict JSON
        assert doc["guarantee"]["space"] is None and doc["guarantee"]["radius"] == "inf", doc["guarantee"]
        assert json.loads(json.dumps(out.document(), allow_nan=False)) == doc
    else:
        space = "embedding" if mech.family == "posthoc" else "input"
        assert doc["guarantee"]["space"] == space, doc["guarantee"]
    stated = spent.to_dict()
    assert (doc["guarantee"]["space"], doc["guarantee"]["norm"]) == (stated["space"], stated["norm"])
    if out.released:
        assert len(doc["value"]) == len(out.value) and all(math.isfinite(v) for v in doc["value"])


@pytest.mark.parametrize("name", registry.names())
def test_outlook_draws_nothing_and_states_the_release_guarantee(name: str) -> None:
    mech = registry.get(name)
    target = mech.load(dataset="digits", model=None, models_dir=None)
    setting = mech.setting(epsilon=2.0, delta=1e-5, **_extra(mech))
    look = mech.outlook(target, setting)
    assert isinstance(look, Outlook) and look.mechanism == mech.name
    assert look.guarantee.epsilon == 2.0 and look.noise_scale > 0 and look.noise_scale_effective > 0
    assert look.release_probability in ((None,) if mech.name == "PTR" else (1.0,))
    x = mech.prepare(target, np.zeros(mech.image_shape(target), dtype=np.float32))
    a = mech.release(target, x, setting)
    b = mech.release(target, x, setting)
    assert a.guarantee.epsilon == look.guarantee.epsilon and a.guarantee.delta == look.guarantee.delta
    if a.released and b.released:
        assert a.value != b.value  # OS randomness by default: two draws differ


def test_parameters_are_checked_against_the_mechanisms_ranges(image) -> None:
    with pytest.raises(ParameterError, match=r"alpha must be in \[0.0001, 10\], got 20"):
        privcore.release(image, dataset="digits", mechanism="gauss-output", epsilon=1.0, alpha=20.0)
    with pytest.raises(ParameterError, match="takes no radius"):
        privcore.release(image, dataset="digits", mechanism="lap-output", epsilon=1.0, alpha=1.0, radius=0.5)
    lap = {"dataset": "digits", "mechanism": "lap-output", "epsilon": 1.0, "alpha": 1.0}
    with pytest.raises(ParameterError, match="for mechanism 'Lap-Output' must be one of ip-lipschitz-l1"):
        privcore.release(image, **lap, model="ip-cnn")


def test_a_certification_this_process_did_not_make_is_refused(image) -> None:
    cert = privcore.certify(image, dataset="digits")
    ok = privcore.release(image, dataset="digits", mechanism="ptr", epsilon=2.0, certification=cert)
    assert ok.certification is cert
    forged = dataclasses.replace(cert, phi=cert.phi + 100.0)  # a larger φ would make the test pass
    copied = privcore.Certification(**{f.name: getattr(cert, f.name) for f in dataclasses.fields(cert)})
    for bad in (forged, copied):
        with pytest.raises(ParameterError, match=r"not made by privcore\.certify"):
            privcore.release(image, dataset="digits", mechanism="ptr", epsilon=2.0, certification=bad)
    object.__setattr__(cert, "phi", cert.phi + 100.0)  # altered in place
    with pytest.raises(ParameterError, match=r"not made by privcore\.certify"):
        privcore.release(image, dataset="digits", mechanism="ptr", epsilon=2.0, certification=cert)


def test_the_cli_releases_every_mechanism_with_the_total_epsilon(
    tmp_path: Path, image, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process (typer's runner): the installed command's start-up is tested in test_packaging."""
    from PIL import Image
    from typer.testing import CliRunner

    from privcore.cli import app

    png = tmp_path / "digit.png"
    Image.fromarray((image * 255).astype(np.uint8)).save(png)
    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("gauss-output", "ptr", "global-gauss", "ldp-image", "ldp-embedding"):
        extra = ["--alpha", "0.5"] if name == "gauss-output" else []
        out = CliRunner().invoke(app, ["release", "--dataset", "digits", str(png), "--mechanism", name,
                                       "--epsilon", "4", *extra])
        assert out.exit_code == 0, out.output
        doc = json.loads(out.stdout)
        assert doc["mechanism"] == registry.get(name).name and doc["guarantee"]["epsilon"] == 4.0
