"""Root reads for the job's user only what that user could read, and runs none of its code.

Round four of the hostile sweep: a rank run as `nobody` set the flight recorder's pipe and
dump file, and on the trigger made its dump path a symbolic link to a 0600 root file. gputui
followed the link, copied the file, chowned the copy to the job's uid and ran the analyzer
as that uid with the job's PYTHONPATH, where a planted `fr_trace` module read the secret.
Here the rank is a real process run as uid 65534 answering the real FIFO.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from gputui.collect.nccl.flightrec import FrRank, flight_record
from gputui.collect.nccl.fr_dumps import open_owned

NOBODY = 65534

# The rank: makes its FIFO, waits for the trigger, then "dumps" as the test asks: a link to
# the secret, or a file of its own. It keeps a write end open itself, so its read blocks.
RANK = r"""
import os, sys
d, how, secret = sys.argv[1:4]
os.mkfifo(d + "/pipe_0.pipe")
fd = os.open(d + "/pipe_0.pipe", os.O_RDONLY | os.O_NONBLOCK)
keep = os.open(d + "/pipe_0.pipe", os.O_WRONLY | os.O_NONBLOCK)
os.set_blocking(fd, True)
print("ready", flush=True)
os.read(fd, 16)
if how == "link":
    os.symlink(secret, d + "/dump_0")
else:
    with open(d + "/dump_0", "wb") as f:
        f.write(b"not a pickle")
print("dumped", flush=True)
sys.stdin.read()
"""

# What the job's user plants where its PYTHONPATH points: it records that it ran.
PLANTED = "open(__file__ + '.ran', 'w').write('ran')\n"


def _as_nobody() -> None:
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def _system_python() -> str:
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 for the rank run as uid 65534")
    return python


@pytest.fixture
def job_dir():
    """A directory the job's user (nobody) owns, outside root's private tmp_path."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the rank runs as another user (uid 65534)")
    d = tempfile.mkdtemp(prefix="gputui-h3-")
    os.chown(d, NOBODY, NOBODY)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def _rank(job_dir: Path, how: str, secret: Path):
    python = _system_python()
    p = subprocess.Popen(
        [python, "-c", RANK, str(job_dir), how, str(secret)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=_as_nobody,  # noqa: PLW1509
        cwd="/",
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    planted = job_dir / "pp" / "torch" / "distributed" / "flight_recorder"
    planted.mkdir(parents=True)
    for d in (planted, planted.parent, planted.parent.parent):
        (d / "__init__.py").write_text("")
    (planted / "fr_trace.py").write_text(PLANTED)
    for root, dirs, files in os.walk(job_dir / "pp"):  # the job's user owns what it planted
        for name in [root, *(os.path.join(root, x) for x in dirs + files)]:
            os.chown(name, NOBODY, NOBODY)
    env = {
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": f"{job_dir}/pipe_",
        "TORCH_FR_DUMP_TEMP_FILE": f"{job_dir}/dump_",
        "PYTHONPATH": str(job_dir / "pp"),
    }
    rank = FrRank(pid=p.pid, rank=0, env=env, uid=NOBODY, gid=NOBODY, interpreter=python)
    return p, rank, planted / "fr_trace.py.ran"


def test_a_dump_that_is_a_link_to_a_root_file_is_refused_not_copied(job_dir, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root's secret\n")
    secret.chmod(0o600)
    p, rank, ran = _rank(job_dir, "link", secret)
    try:
        res = flight_record([rank], threading.Event(), world_size=1, wait_s=3)
    finally:
        p.kill()
        p.wait(10)
    assert res["outcome"] in ("no_dumps", "failed"), res  # the link is never taken
    assert "root's secret" not in repr(res)
    assert not ran.exists(), "the job's planted analyzer ran"


def test_the_analyzer_never_runs_with_the_jobs_pythonpath(job_dir, tmp_path):
    p, rank, ran = _rank(job_dir, "file", tmp_path / "unused")
    try:
        res = flight_record([rank], threading.Event(), world_size=1, wait_s=30)
    finally:
        p.kill()
        p.wait(10)
    assert res["dumps"] == [0], res  # the rank's own file was taken
    assert res["analyzer"]["argv"][1] == "-I"
    assert not ran.exists(), "the module planted on the job's PYTHONPATH ran"
    assert res["outcome"] == "failed", res  # the system python has no torch: said, not hidden


def test_a_file_of_another_user_or_a_link_is_not_opened_for_the_job(tmp_path):
    mine = tmp_path / "dump"
    mine.write_bytes(b"x")
    link = tmp_path / "link"
    link.symlink_to(mine)
    os.close(open_owned(str(mine), os.geteuid()))  # the job's own file: read
    with pytest.raises(OSError, match="not the job's user"):
        open_owned(str(mine), os.geteuid() + 1)
    with pytest.raises(OSError) as e:
        open_owned(str(link), os.geteuid())
    assert e.value.errno == 40  # ELOOP: O_NOFOLLOW refused the link
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        open_owned(str(fifo), os.geteuid())  # and never blocks on it


def test_a_debug_server_dump_of_another_user_or_through_a_link_is_not_read(tmp_path):
    """The debug server's periodic dumps sit in a directory the job names: with the job's
    user given (it named the directory), a dump that is a link or another user's file is
    refused and its content never read; the job's own dump is read."""
    from test_debugserver_parse import page

    from gputui.collect.nccl import debugserver as ds

    secret = tmp_path / "secret.txt"
    secret.write_text(page("gloo2-stacks-dump.txt"))  # something that would parse
    secret.chmod(0o600)
    d = tmp_path / "dumps"
    d.mkdir()
    (d / "stacks_20260101_000100.txt").symlink_to(secret)
    rec = ds.read_dump(str(d), "j", "stalled", {}, 2100.0, owner=os.geteuid())
    assert rec is None  # a link is not even a dump (it is not listed)
    own = d / "stacks_20260101_000200.txt"
    own.write_text(page("gloo2-stacks-dump.txt"))
    rec = ds.read_dump(str(d), "j", "stalled", {}, 2100.0, owner=os.geteuid() + 1)
    assert rec is not None and rec["outcome"] == "failed"
    assert "not the job's user" in rec["error"] and rec["ranks"] == []
    rec = ds.read_dump(str(d), "j", "stalled", {}, 2100.0, owner=os.geteuid())
    assert rec is not None and rec["outcome"] == "done" and rec["ranks"]
