"""Nothing read from disk can make a privacy decision pass (issue 30, item 1).

A models directory and the Lipschitz cache are inputs this process did not compute: a pattern
table, a cached φ or a cached certificate found there may at most order work or produce a fail.
Every pass must rest on bounds computed here from the weights. Each test plants what an attacker
with write access could plant (files re-checksummed, cache rows written through the cache's own
API, so authenticated) and checks that a ball whose certified L is above Δp still fails.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from privcore.errors import CertificationError
from privcore.lipschitz import Certifier
from privcore.lipschitz.cache import LipschitzCache, _canonical
from privcore.lipschitz.certifier import certificate_key
from privcore.lipschitz.codes import codes_to_b64
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.pattern_store import (
    CERT_KIND,
    clear_pattern_tables,
    realised_pattern_table,
    region_certificate_key,
    shipped_obfuscators,
)
from privcore.lipschitz.patterns import RegionMemo, threshold_pattern_table
from privcore.lipschitz.region_certs import RegionCertificates
from privcore.mechanisms.phi_cache import cached_phi, phi_key
from privcore.mechanisms.ptr import compute_phi

REPO = Path(__file__).resolve().parents[1]
R = 0.25  # the digits models' R (card)


@pytest.fixture()
def digits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, ReluNetwork, float, np.ndarray]:
    """A models directory holding the shipped digits ARL-C-N obfuscator only, a private cache, no
    table in memory, and a centre z whose certified L(f, B(z, R)) is above the card's Δp."""
    models = tmp_path / "models"
    (models / "digits").mkdir(parents=True)
    for path in (REPO / "models" / "digits").glob("obfuscator-ARL-C-N.*"):
        shutil.copy(path, models / "digits" / path.name)
    monkeypatch.setenv("PRIVCORE_MODELS_DIR", str(models))
    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path / "cache"))
    clear_pattern_tables()
    [(_, net, dp)] = shipped_obfuscators(models)
    z = np.random.default_rng(0).normal(size=(13, net.in_dim))[12]  # L(B(z, R)) = 0.836 > Δp = 0.826
    cert = Certifier(time_limit=60).certify(net, z, R)
    assert cert.exact and cert.lower > dp, (cert.lower, dp)
    clear_pattern_tables()
    yield models, net, dp, z
    clear_pattern_tables()


def _forge_shipped_table(models: Path, net: ReluNetwork, threshold: float) -> Path:
    """What anyone with write access to a models directory could write before this issue: a
    "complete" table of the patterns above ``threshold`` that lists none, with the plain SHA-256
    the loader checked, recomputed."""
    key = {"model": net.digest, "threshold": float(threshold), "input_norm": "linf", "output_norm": "l1",
           "format": 1}
    empty = base64.b64encode(b"").decode("ascii")
    value = {"format": 1, "n_hidden": net.n_hidden, "in_dim": net.in_dim, "floor": float(threshold),
             "count": 0, "codes": codes_to_b64(np.zeros(0, dtype=np.int64), net.n_hidden), "norms": empty,
             "state": empty, "box_lower": empty, "box_upper": empty}
    plain = f"2\0{_canonical(key)}\0{_canonical(value)}"  # the loader's SHA-256, version 2
    doc = {"key": key, "value": value, "checksum": hashlib.sha256(plain.encode()).hexdigest()}
    path = models / "pattern-tables" / f"{hashlib.sha256(_canonical(key).encode()).hexdigest()[:32]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def test_a_forged_table_in_the_models_directory_cannot_make_a_decision_pass(digits) -> None:
    models, net, dp, z = digits
    _forge_shipped_table(models, net, dp)
    assert Certifier(time_limit=60).decide(net, z, R, dp) is False
    phi = compute_phi(net, z, radius=R, delta_p=dp, r_max=4.0, tol=R / 4, lipschitz=Certifier(time_limit=60))
    assert phi.phi == 0.0 and phi.r_star is None


def test_nothing_from_a_forged_table_persists_into_the_cache(digits) -> None:
    """The forged table once seen, then deleted: the next process (memory cleared) still fails."""
    models, net, dp, z = digits
    path = _forge_shipped_table(models, net, dp)
    Certifier(time_limit=60).decide(net, z, R, dp)
    path.unlink()
    clear_pattern_tables()
    assert Certifier(time_limit=60).decide(net, z, R, dp) is False


def test_a_cached_phi_that_claims_a_pass_is_verified_before_it_is_used(digits, tmp_path: Path) -> None:
    """An authentic cache row (written through the cache's API, as a process holding the secret
    could) saying φ is large: cached_phi re-derives the pass and returns the true φ = 0."""
    _, net, dp, z = digits
    store = LipschitzCache(tmp_path / "cache")
    certifier = Certifier(time_limit=60, cache=store)
    r_max, tol = 4.0, R / 4
    key = phi_key(net.digest, z, radius=R, delta_p=dp, r_max=r_max, tol=tol, certifier=certifier)
    grid = dict(radius=R, delta_p=dp, r_max=r_max, tol=tol)
    truth = compute_phi(net, z, lipschitz=Certifier(time_limit=60), **grid)
    assert truth.phi == 0.0
    forged = replace(truth, phi=r_max - R, r_star=r_max, n_decisions=2,
                     evaluations=((R, True), (r_max, True)))
    value = asdict(forged)
    del value["center"]
    store.put("phi", key, value)
    clear_pattern_tables()
    with pytest.warns(RuntimeWarning, match="did not verify"):
        got = cached_phi(net, z, certifier=certifier, cache=store, **grid)
    assert got.phi == 0.0 and got.r_star is None
    assert store.get("phi", key)["r_star"] is None  # the row now holds what was computed here


def test_a_cached_certificate_cannot_make_a_decision_pass(digits, tmp_path: Path) -> None:
    _, net, dp, z = digits
    store = LipschitzCache(tmp_path / "cache")
    certifier = Certifier(time_limit=60, cache=store)
    key = certificate_key(net.digest, z, R, kind="exact", norms=certifier.norms)
    true_cert = Certifier(time_limit=60).certify(net, z, R)
    store.put("certificate", key, asdict(replace(true_cert, upper=0.5, lower=0.5)))
    certifier.certify(net, z, R)  # reads the row back (a report may show it)
    assert certifier.decide(net, z, R, dp) is False


def test_forged_region_certificates_cannot_make_a_decision_pass(digits, tmp_path: Path) -> None:
    """An authentic row of region certificates (written through the cache's API) that labels every
    pattern above Δp EMPTY and boxes every region tightly, with made-up dual vectors: the table
    loaded from it holds only labels whose certificates verify here (a box side is recomputed from
    its vector, so it can be loose, never wrong), and the ball whose certified L is above Δp
    still fails, decision and φ alike."""
    _, net, dp, z = digits
    store = LipschitzCache(tmp_path / "cache")
    codes = threshold_pattern_table(net, dp, Norms()).codes
    n, d, m = codes.size, net.in_dim, net.in_dim + 1
    rng = np.random.default_rng(0)
    rows = np.stack([np.sort(rng.choice(net.n_hidden, size=m, replace=False)) for _ in range(n)])
    forged = RegionCertificates(
        empty_codes=codes, empty_rows=rows, empty_y=rng.exponential(size=(n, m)),
        boxed_codes=codes, side_codes=np.repeat(codes, 2 * d), side_kind=np.tile(np.arange(2 * d), n),
        side_rows=np.repeat(rows, 2 * d, axis=0), side_y=rng.exponential(size=(2 * d * n, m)) * 1e-3)
    value = forged.to_value(d=d, k=net.n_hidden)
    value["box_lower"] = value["box_upper"] = "AAAAAAAAAAA="  # what an old table held: never read
    store.put(CERT_KIND, region_certificate_key(net.digest, dp, Norms()), value)
    clear_pattern_tables()
    with pytest.warns(RuntimeWarning, match="did not verify"):
        table = realised_pattern_table(net, dp, Norms())
    assert (table.state == RegionMemo.EMPTY).sum() < n // 2
    assert Certifier(time_limit=60).decide(net, z, R, dp) is False
    phi = compute_phi(net, z, radius=R, delta_p=dp, r_max=4.0, tol=R / 4, lipschitz=Certifier(time_limit=60))
    assert phi.phi == 0.0 and phi.r_star is None


class _PassingCertifier(Certifier):
    """A broken oracle: answers every question "pass"."""

    def decide(self, f, center, radius, threshold, /) -> bool:
        return True


def test_backstop_phi_is_never_positive_when_certified_L_at_R_is_above_delta_p(digits) -> None:
    _, net, dp, z = digits
    with pytest.raises(CertificationError, match="above Δp"):
        cached_phi(net, z, radius=R, delta_p=dp, r_max=4.0, tol=R / 4, certifier=_PassingCertifier(),
                   cache=False)


def test_api_certify_refuses_phi_above_zero_when_its_own_certificate_is_above_delta_p(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``privcore.certify`` cross-checks φ against the exact certificate at R that it reports:
    digits test image 27 has L(f, B(z, R)) = 0.843 > Δp = 0.826, so a φ > 0 for it (here from a
    stand-in for a φ source gone wrong) raises instead of being returned."""
    import privcore
    from privcore.data.registry import load_dataset
    from privcore.mechanisms import phi_cache

    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path / "cache"))
    image = np.asarray(load_dataset("digits").x_test[27])[0]
    honest = privcore.certify(image, dataset="digits", model="ARL-C-N", cache=False)
    assert honest.phi == 0.0 and honest.lipschitz > honest.delta_p
    wrong = replace(honest.phi_result, phi=honest.r_max - honest.radius, r_star=honest.r_max, n_decisions=2,
                    evaluations=((honest.radius, True), (honest.r_max, True)))
    monkeypatch.setattr(phi_cache, "cached_phi", lambda *a, **k: wrong)
    with pytest.raises(CertificationError, match="inconsistent"):
        privcore.certify(image, dataset="digits", model="ARL-C-N", cache=False)
