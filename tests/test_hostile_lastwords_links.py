"""Hostile row H4: last words through a link. gputui runs as root; a rank runs as `nobody`.

The rank writes its stderr to a file in a directory it owns, gputui's rank I/O tracker
remembers that file, and then the rank plants a trap and dies (exit 1):

- it replaces its log file with a symbolic link to a root-only (0600) file;
- it replaces its log's directory with a link to a root-only directory holding such a file;
- its TORCHELASTIC_ERROR_FILE names a root-only file outright.

Root, following the link or reading the file, would quote the root-only file's line as the
rank's last words ("rank 1 died: RuntimeError: <the secret>"). gputui opens the job user's
files component by component without following links and keeps only what that user could
read (gputui.collect.safe_open): the secret is in no finding and no evidence, and the rank is
said to have exited without a message.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from synth import with_real_pids
from waiting import wait_until

from gputui.collect.safe_open import open_for
from gputui.watch.watcher import Watcher

NOBODY = 65534
SECRET = "RuntimeError: ROOT-ONLY-SECRET-4242"

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to run a rank as nobody"
)

RANK = textwrap.dedent(
    """\
    import os, sys
    log, trap, target = sys.argv[1], sys.argv[2], sys.argv[3]
    sys.stderr.write("rank 1 starting\\n"); sys.stderr.flush()
    print("ready", flush=True)
    sys.stdin.readline()
    if trap == "file":
        os.unlink(log)
        os.symlink(target, log)
    elif trap == "dir":
        d = os.path.dirname(log)
        os.rename(d, d + ".old")
        os.symlink(target, d)
    sys.exit(1)
    """
)


def python_for_nobody() -> str:
    """An interpreter `nobody` may run (the test's venv may sit in root's home)."""
    for cand in (sys.executable, "/usr/bin/python3", shutil.which("python3") or ""):
        if not cand:
            continue
        try:
            done = subprocess.run(
                [cand, "-c", "pass"],
                user=NOBODY,
                group=NOBODY,
                extra_groups=[],
                capture_output=True,
                timeout=60,
                cwd="/",
            )
        except OSError:
            continue
        if done.returncode == 0:
            return cand
    pytest.skip("no Python interpreter that the user nobody may run")


@pytest.fixture
def places() -> Iterator[tuple[Path, Path]]:
    """(a directory in /tmp owned by nobody, a root-only directory holding the secret)."""
    mine = Path(tempfile.mkdtemp(prefix="gputui-h4-job-"))
    os.chown(mine, NOBODY, NOBODY)
    secret = Path(tempfile.mkdtemp(prefix="gputui-h4-root-"))  # 0700, root's
    for name in ("secret.txt", "rank1.err"):
        f = secret / name
        f.write_text(f"Traceback (most recent call last):\n{SECRET}\n")
        f.chmod(0o600)
    (secret / "error.json").write_text(
        json.dumps({"message": {"message": SECRET, "extraInfo": {"timestamp": "1"}}})
    )
    (secret / "error.json").chmod(0o600)
    yield mine, secret
    shutil.rmtree(mine, ignore_errors=True)
    shutil.rmtree(str(mine) + ".old", ignore_errors=True)
    shutil.rmtree(secret, ignore_errors=True)


def run(places: tuple[Path, Path], trap: str) -> object:
    mine, secret = places
    workdir = mine / "run"
    workdir.mkdir()
    os.chown(workdir, NOBODY, NOBODY)
    (mine / "train.py").write_text(RANK)
    log = workdir / "rank1.err"
    target = {"file": secret / "secret.txt", "dir": secret, "env": secret}[trap]
    env = {**os.environ, "TORCHELASTIC_ERROR_FILE": str(secret / "error.json")}
    peer = subprocess.Popen(
        [sys.executable, "-c", "print('ready', flush=True); import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    with open(log, "wb") as err:
        os.fchown(err.fileno(), NOBODY, NOBODY)
        rank = subprocess.Popen(
            [python_for_nobody(), str(mine / "train.py"), str(log), trap, str(target)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=mine,
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            env=env,
        )
    try:
        for p in (peer, rank):
            assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        w = Watcher(60.0, 120.0, auto_dump=False, host_ranks=False)
        try:
            w.update(with_real_pids(1000.0, [peer.pid, rank.pid], ["compute", "compute"]))
            assert wait_until(
                lambda: (
                    w.rankio is not None
                    and w.rankio.get(rank.pid) is not None
                    and w.rankio.get(rank.pid).tail_path == str(log)
                )
            )
            assert rank.stdin is not None
            rank.stdin.write(b"go\n")
            rank.stdin.close()
            assert rank.wait(timeout=30) == 1
            w.update(with_real_pids(1000.25, [peer.pid, None], ["spin", "gone"]))
            assert w.wait(30)
            for i in range(2, 9):  # the peer spins 2 s for it: a wordless death is plain
                v = w.update(with_real_pids(1000 + 0.25 * i, [peer.pid, None], ["spin", "gone"]))
            return v
        finally:
            w.close()
    finally:
        for p in (peer, rank):
            p.kill()
            p.wait(timeout=10)


@pytest.mark.parametrize("trap", ["file", "dir", "env"])
def test_a_root_only_file_is_never_quoted_as_a_ranks_last_words(places, trap):
    v = run(places, trap)
    assert v.state == "stalled" and v.suspects == (1,)
    seen = json.dumps([v.reason, v.findings, v.evidence], default=str)
    assert "ROOT-ONLY-SECRET" not in seen
    assert v.findings[0].startswith("rank 1 (pid ") and " exited; no message found" in v.findings[0]


def test_the_opener_refuses_links_and_what_the_user_could_not_read(places):
    mine, secret = places
    link = mine / "link"
    link.symlink_to(secret / "secret.txt")
    for path, uid in ((link, None), (link, NOBODY), (secret / "secret.txt", NOBODY)):
        with pytest.raises(OSError):
            os.close(open_for(str(path), uid))
    own = mine / "own.log"
    own.write_text("x")
    os.chown(own, NOBODY, NOBODY)
    own.chmod(0o600)
    os.close(open_for(str(own), NOBODY))  # its own file: read
    with pytest.raises(OSError):  # the same file as another (non-root) user: refused
        os.close(open_for(str(own), 1000))
