"""bench/load.py's guards (no browser, no server): loopback-only traffic, distinct uploads, statistics."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def load():
    spec = importlib.util.spec_from_file_location("bench_load", ROOT / "bench" / "load.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_load"] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("bench_load", None)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8501", "http://127.0.0.2:80/", "http://[::1]:8501", "http://localhost:8501"]
)
def test_loopback_urls_are_accepted(load, url: str) -> None:
    assert load.loopback_url(url) == url.rstrip("/")


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1:8501",
        "http://0.0.0.0:8501",
        "http://192.168.1.20",
        "http://[2001:db8::1]:8501",
        "ftp://127.0.0.1/",
        "127.0.0.1:8501",
    ],
)
def test_other_hosts_are_refused(load, url: str) -> None:
    with pytest.raises(ValueError, match="url"):
        load.loopback_url(url)


def test_every_upload_is_a_different_image(load, tmp_path: Path) -> None:
    shipped = len(list((ROOT / "data" / "samples").glob("*/*.png")))
    paths = load.upload_images(4 * shipped, tmp_path)
    assert len({p.name for p in paths}) == len(paths)
    from PIL import Image

    pixels = set()
    for p in paths:
        with Image.open(p) as im:
            pixels.add(hashlib.sha256(im.tobytes() + repr(im.size).encode()).hexdigest())
    # a mirrored or flipped copy of a symmetric sample could repeat it; none of the shipped ones is
    assert len(pixels) == len(paths)


def test_percentiles_and_proc_readings(load) -> None:
    stats = load.percentiles([1.0, 2.0, 3.0, 4.0, 10.0])
    assert stats == {"n": 5, "p50": 3.0, "p95": pytest.approx(8.8), "max": 10.0}
    assert load.percentiles([])["p95"] is None
    assert load.cpu_seconds(os.getpid()) > 0
    assert load.rss_bytes(os.getpid()) > 1 << 20
    assert load.cpu_seconds(2**22 + 12345) is None  # no such process
