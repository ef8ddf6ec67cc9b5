"""The package as a user gets it: a wheel and an sdist built from this checkout, the wheel
installed as a tool into a fresh environment (`uv tool install`, as the docs say), and the
installed `gputui` runs, bundled demo included."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")


@pytest.mark.skipif(not Path(uv).exists(), reason="uv is not installed (pip install uv)")
def test_the_wheel_installs_as_a_tool_and_gputui_runs(tmp_path):
    dist = tmp_path / "dist"
    r = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    wheels, sdists = list(dist.glob("*.whl")), list(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1
    from gputui import __version__

    assert wheels[0].name.startswith(f"gputui-{__version__}-"), wheels[0].name
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "gputui/data/demo-h200x2-hang.jsonl.gz" in names
    assert "gputui/py.typed" in names  # type checkers read gputui's hints (PEP 561)
    assert not any(n.startswith("tests/") for n in names)

    env = {
        **os.environ,
        "UV_TOOL_DIR": str(tmp_path / "tools"),
        "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
        "UV_PYTHON": sys.executable,
    }
    r = subprocess.run(
        [uv, "tool", "install", str(wheels[0])], capture_output=True, text=True, env=env,
        timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    gputui = tmp_path / "bin" / "gputui"
    r = subprocess.run([str(gputui), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "usage: gputui" in r.stdout
    r = subprocess.run(
        [str(gputui), "check", "--demo", "--json"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 1, r.stderr  # the demo's hangs clear, but a replay exits the worst
    assert '"state": "stalled"' in r.stdout


def test_the_version_is_written_once_in_the_package():
    """pyproject.toml reads the version from gputui.__version__, so the two cannot drift."""
    import re

    text = (REPO / "pyproject.toml").read_text()  # tomllib: 3.11+ only
    tables = dict(re.findall(r"^\[([^\]]+)\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S))
    assert "version =" not in tables["project"], "a second version in pyproject.toml"
    assert 'dynamic = ["version"]' in tables["project"]
    assert 'version = { attr = "gputui.__version__" }' in tables["tool.setuptools.dynamic"]
    from gputui import __version__

    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
