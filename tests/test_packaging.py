"""The installable package (issue 19): the wheel holds both packages, their console commands and
the shipped models and pages, and works installed, away from the checkout."""

from __future__ import annotations

import configparser
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "app.py", "privcore", "privlens", "pages", "models", ".streamlit")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip wheel`` of a copy of the sources (the build writes build/ and *.egg-info beside them)."""
    pytest.importorskip("setuptools", reason="the wheel is built with setuptools (requirements.txt)")
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=ignore)
        else:
            shutil.copy2(p, src / name)
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out)]
    subprocess.run([*cmd, str(src)], check=True, capture_output=True, timeout=300)
    (whl,) = out.glob("privlens-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The wheel installed (no dependencies: this venv has them) under its own prefix; returns the
    prefix and an environment that sees the installed copy and not the checkout."""
    prefix = tmp_path_factory.mktemp("prefix")
    # --ignore-installed: pip would otherwise uninstall the venv's own (editable) privlens first, and with
    # it the .venv/bin/privcore and privlens commands that `make` installed
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed",
           "--prefix", str(prefix)]
    commands = sorted(p.name for p in Path(sys.prefix, "bin").glob("priv*"))  # what `make` installed here
    subprocess.run([*cmd, str(wheel)], check=True, capture_output=True, timeout=300)
    assert sorted(p.name for p in Path(sys.prefix, "bin").glob("priv*")) == commands  # left alone
    (site,) = prefix.glob("lib/python*/site-packages")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PRIVCORE_MODELS_DIR")}
    env["PYTHONPATH"] = str(site)
    env["PRIVLENS_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    return prefix, env


def test_wheel_has_entry_points_models_and_pages(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    (ep,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    scripts = configparser.ConfigParser()
    scripts.read_string(zipfile.ZipFile(wheel).read(ep).decode())
    expected = {"privcore": "privcore.cli:run", "privlens": "privlens.launch:main"}
    assert dict(scripts["console_scripts"]) == expected
    shipped = {p.relative_to(ROOT / "models").as_posix() for p in (ROOT / "models").rglob("*") if p.is_file()}
    assert shipped and {f"privcore/_models/{n}" for n in shipped} <= names
    pages = {p.name for p in (ROOT / "pages").glob("*.py")}
    assert {f"privlens/_site/pages/{n}" for n in pages} <= names
    assert {"privlens/_site/app.py", "privlens/_site/.streamlit/config.toml", "privcore/_paths.py"} <= names
    assert "privlens/static/privlens-icon.svg" in names  # the tab icon: local, never fetched from a CDN
    assert not any(n.startswith(("tests/", "bench/", "data/")) for n in names)
    modules = {p.relative_to(ROOT).as_posix() for pkg in ("privcore", "privlens")
               for p in (ROOT / pkg).rglob("*.py")}
    assert modules - names == set()  # every module of the checkout, subpackages included, is in the wheel


def test_installed_commands_run_from_another_directory(installed, tmp_path: Path) -> None:
    prefix, env = installed
    run = {"cwd": tmp_path, "env": env, "capture_output": True, "text": True, "timeout": 120}
    out = subprocess.run([str(prefix / "bin" / "privcore"), "version"], **run)
    assert out.returncode == 0 and out.stdout.strip() == "0.1.0", out.stderr
    code = (
        "import privcore, privcore.models.pipeline as p, privlens.launch as l; "
        "print(privcore.__file__); print(p.default_models_dir()); print(l.app_path()); "
        "print(len(p.list_models())); p.load_pipeline('digits')"
    )
    out = subprocess.run([sys.executable, "-c", code], **run)
    assert out.returncode == 0, out.stderr
    pkg, models, app, n_models = out.stdout.split()
    site = env["PYTHONPATH"]
    assert pkg.startswith(site) and models.startswith(site) and app.startswith(site), out.stdout
    assert int(n_models) > 0
    out = subprocess.run([sys.executable, "-c", code], **{**run, "env": {**env, "PRIVCORE_MODELS_DIR": "/x"}})
    assert out.stdout.split()[1] == "/x"  # the environment variable overrides the package data
    out = subprocess.run([str(prefix / "bin" / "privlens"), "--help"], **run)
    assert out.returncode == 0 and "streamlit run" in out.stdout


def test_installed_dashboard_answers(installed, tmp_path: Path) -> None:
    prefix, env = installed
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [str(prefix / "bin" / "privlens"), "--server.port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert proc.poll() is None, "privlens exited"
                assert time.monotonic() < deadline, "privlens did not answer in 90 s"
                time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_installed_dashboard_renders_its_home_page(installed, tmp_path: Path) -> None:
    _, env = installed
    code = (
        "from streamlit.testing.v1 import AppTest; import privlens.launch as l; "
        "at = AppTest.from_file(str(l.app_path()), default_timeout=120).run(); "
        "assert not at.exception and not at.error, (list(at.exception), list(at.error)); "
        "print(l.app_path()); print(at.title[0].value, flush=True); "
        "import os; os._exit(0)"  # the check is done: skip interpreter teardown (solver/torch threads)
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[:3000]
    app, title = out.stdout.split()
    assert app.startswith(env["PYTHONPATH"]) and title == "privlens"
