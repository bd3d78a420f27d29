"""`make torch-build`: which torch build `make install` takes (issue 19, CPU-only installs).

auto takes PyTorch's CPU index where no NVIDIA GPU answers and the index is reachable, PyPI's CUDA
build otherwise; cpu/cuda force one; anything else is refused. The GPU probe and the index are
overridden (GPU_PROBE, TORCH_INDEX) so both branches run on any machine.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _torch_build(*assignments: str) -> subprocess.CompletedProcess[str]:
    cmd = ["make", "-s", "--no-print-directory", "-C", str(ROOT), "torch-build", *assignments]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def cpu_index(tmp_path: Path) -> Iterator[str]:
    """A local stand-in for PyTorch's CPU index (a simple-index page for torch)."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "index.html").write_text("<html><body></body></html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_no_gpu_and_a_reachable_cpu_index_takes_the_cpu_build(cpu_index: str) -> None:
    out = _torch_build("GPU_PROBE=false", f"TORCH_INDEX={cpu_index}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "cpu"


def test_no_gpu_and_no_index_takes_pypi_and_says_why(tmp_path: Path) -> None:
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens
    out = _torch_build("GPU_PROBE=false", f"TORCH_INDEX={closed}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "cuda"
    assert "not reachable" in out.stderr and closed in out.stderr


def test_a_gpu_takes_the_cuda_build_even_with_the_cpu_index(cpu_index: str) -> None:
    out = _torch_build("GPU_PROBE=true", f"TORCH_INDEX={cpu_index}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "cuda"


@pytest.mark.parametrize("build", ["cpu", "cuda"])
def test_an_explicit_build_is_taken_as_given(build: str) -> None:
    out = _torch_build(f"TORCH_BUILD={build}", "GPU_PROBE=false", "TORCH_INDEX=http://127.0.0.1:9")
    assert (out.returncode, out.stdout.strip()) == (0, build)


def test_an_unknown_build_is_refused_with_the_allowed_values() -> None:
    out = _torch_build("TORCH_BUILD=rocm")
    assert out.returncode == 2
    assert "TORCH_BUILD=rocm" in out.stderr and "auto, cpu, cuda" in out.stderr


def test_a_failed_pip_install_fails_make_and_leaves_no_stamp(tmp_path: Path) -> None:
    """The install recipe chains pip and the build record with ';': a failing pip must still fail
    `make install` and leave neither the install stamp nor the record (else the next `make run`
    skips the install and fails on an import)."""
    for name in ("Makefile", "requirements.txt", "requirements-cuda.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    fake = tmp_path / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\ncase " $* " in *" -r "*) echo "pip: failed" >&2; exit 1;; esac\nexit 0\n')
    fake.chmod(0o755)
    cmd = ["make", "-s", "--no-print-directory", "-C", str(tmp_path), "install", "TORCH_BUILD=cuda"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0, out.stdout + out.stderr
    assert not (tmp_path / ".venv" / ".installed").exists()
    assert not (tmp_path / ".venv" / ".torch-build").exists()
