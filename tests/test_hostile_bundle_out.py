"""`bundle --out` writes safely: never through a symbolic link, never half a bundle.

The bundle is written into a new temporary directory beside the target and renamed at the
end. A symbolic link at --out is refused (as `record` refuses one); a disk that fills up
mid-write (a real 64 KiB tmpfs, mounted by the test when it runs as root) leaves nothing
behind and says so in one line with exit 2.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli


def _one_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("gputui: ")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def test_a_symlink_to_a_directory_is_refused_and_nothing_is_written_through_it(tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    line = _one_line(run_cli("bundle", "--demo", "--out", str(tmp_path / "link")))
    assert "is a symbolic link" in line
    assert list(real.iterdir()) == []


def test_a_dangling_symlink_is_refused_too(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    assert "is a symbolic link" in _one_line(
        run_cli("bundle", "--demo", "--out", str(tmp_path / "link"))
    )
    assert not (tmp_path / "nowhere").exists()


def test_a_bundle_appears_whole_with_no_temporary_directory_left(tmp_path):
    r = run_cli("bundle", "--demo", "--out", str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    assert {p.name for p in tmp_path.iterdir()} == {"b"}
    assert (tmp_path / "b" / "README.txt").is_file()


@pytest.fixture
def small_tmpfs(tmp_path) -> Iterator[Path]:
    """A 64 KiB tmpfs with 48 KiB taken, or a skip with the reason it cannot be mounted."""
    mnt = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        (mnt / "filler").write_bytes(b"\0" * 48 * 1024)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


def test_a_full_disk_leaves_no_partial_bundle_and_says_so(small_tmpfs):
    line = _one_line(run_cli("bundle", "--demo", "--out", str(small_tmpfs / "b")))
    assert "No space left on device" in line and "no bundle was left" in line
    assert {p.name for p in small_tmpfs.iterdir()} == {"filler"}
