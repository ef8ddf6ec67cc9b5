"""`gputui fleet` through a real ssh to a real sshd on 127.0.0.1 (and pdsh through it).

The test starts Debian's OpenSSH server (`.ci/run` installs openssh-server) on a free port
with its own host key and a user key made here, as the current user (root in CI). Hosts
`a` and `b` are ssh aliases for it, each replaying its half of the real demo recording with
the venv's gputui as `--remote-gputui`; `never` is a local TCP port that accepts and never
speaks; `closed` refuses. The merged verdict must name b:1 and arrive within the per-host
bound, with `never` and `closed` silent. Skipped, with the reason, when sshd cannot run.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import free_port, run_cli

from gputui.collect.source import demo_path, filter_gpus
from gputui.collect.trace.format import TraceWriter, read_trace
from gputui.tools.fleet.run import pdsh_argv, remote_command, srun_argv
from gputui.tools.fleet.ssh import ssh_argv

SSHD = "/usr/sbin/sshd"
GPUTUI = str(Path(sys.executable).with_name("gputui"))
STALL_END_S = 95.0


class Blackhole:
    """Accepts connections and never says a word (an ssh server that hangs)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.sock.settimeout(0.1)
        self.stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
                self.conns.append(c)
            except OSError:
                continue

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    if not os.path.exists(SSHD) or not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        pytest.skip("openssh-server is not installed (apt-get install openssh-server)")
    d = tmp_path_factory.mktemp("sshd")
    os.chmod(d, 0o700)
    for key in ("hostkey", "userkey"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)],
            check=True,
            timeout=60,
        )
    (d / "authorized_keys").write_text((d / "userkey.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    port = free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/hostkey\nPidFile {d}/sshd.pid\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin yes\n"
        "LogLevel INFO\n"
    )
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    ready = threading.Event()
    log: list[str] = []

    def watch():
        for ln in proc.stderr:
            log.append(ln)
            if "Server listening" in ln:
                ready.set()

    threading.Thread(target=watch, daemon=True).start()
    if not ready.wait(30):
        proc.kill()
        pytest.skip(f"sshd did not start: {''.join(log)[-300:]}")
    hole = Blackhole()
    closed = free_port()
    hostkey = (d / "hostkey.pub").read_text().split()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {hostkey[0]} {hostkey[1]}\n")
    (d / "ssh_config").write_text(
        f"Host a b\n  HostName 127.0.0.1\n  Port {port}\n  User {getpass.getuser()}\n"
        f"  IdentityFile {d}/userkey\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts\n"
        "  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
        f"Host never\n  HostName 127.0.0.1\n  Port {hole.port}\n"
        f"Host closed\n  HostName 127.0.0.1\n  Port {closed}\n"
    )
    # each host's half of the real demo recording, up to inside the stall
    snaps = read_trace(demo_path())
    for host, gpus in (("a", {0}), ("b", {1}), ("both", {0, 1})):
        w = TraceWriter(d / f"{host}.jsonl")
        for s in snaps:
            if s.t - snaps[0].t <= STALL_END_S:
                w.write(filter_gpus(s, frozenset(gpus)))
        w.close()
    yield d
    hole.close()
    proc.terminate()
    proc.wait(timeout=10)


def fleet(
    d: Path, hosts: str, *remote: str, timeout: float = 30, extra=(), gputui: str = GPUTUI
) -> subprocess.CompletedProcess:
    return run_cli(
        "fleet",
        hosts,
        "--ssh-config",
        str(d / "ssh_config"),
        "--remote-gputui",
        gputui,
        "--timeout",
        str(timeout),
        "--connect-timeout",
        "3",
        "--json",
        *extra,
        "--",
        *remote,
        timeout=120,
    )


def test_fleet_over_ssh_names_the_stuck_rank_and_the_silent_hosts_within_the_bound(sshd):
    start = time.monotonic()
    r = fleet(sshd, "a,b,never,closed", "check", "--replay", str(sshd / "{host}.jsonl"), timeout=20)
    took = time.monotonic() - start
    assert r.returncode == 1, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["state"] == "stalled" and last["spinning"] == ["a:0"]
    assert last["suspects"] == ["b:1"] and last["suspect_ranks"] == [1]
    assert last["silent_hosts"] == ["closed", "never"]
    assert "gputui: never: silent" in r.stderr and "gputui: closed: silent (refused" in r.stderr
    assert took < 20 + 15  # the hanging host costs its bound, never more


def test_a_host_that_never_answers_is_cut_at_its_bound(sshd):
    start = time.monotonic()
    r = fleet(sshd, "never", "check", "--replay", "x", timeout=2, extra=("--connect-timeout", "30"))
    assert r.returncode == 2 and "none of the 1 host(s) sent check lines" in r.stderr
    assert "never: silent (timeout: no result within 2 s)" in r.stderr
    assert time.monotonic() - start < 15


def test_other_commands_print_each_hosts_lines_with_its_name(sshd):
    r = fleet(sshd, "a,b", "snapshot", "--replay", str(sshd / "{host}.jsonl"))
    # host a's half spins in the demo's stall: its snapshot exits 1, and so does the fleet
    assert r.returncode == 1, r.stderr
    hosts = {ln.split(": ", 1)[0] for ln in r.stdout.splitlines() if ln.strip()}
    assert hosts == {"a", "b"}


@pytest.mark.skipif(not shutil.which("pdsh"), reason="pdsh is not installed")
def test_pdsh_reaches_the_same_hosts(sshd):
    start = time.monotonic()
    r = run_cli(
        "fleet",
        "a,b,never",
        "--launcher",
        "pdsh",
        "--ssh-config",
        str(sshd / "ssh_config"),
        "--remote-gputui",
        GPUTUI,
        "--timeout",
        "20",
        "--connect-timeout",
        "3",
        "--json",
        "--",
        "check",
        "--replay",
        str(sshd / "both.jsonl"),
        timeout=120,
    )
    assert r.returncode == 1, r.stderr + r.stdout
    last = json.loads(r.stdout.splitlines()[-1])
    # both hosts replay the whole node here: pdsh cannot vary the command per host
    assert last["spinning"] == ["a:0", "b:0"] and last["suspects"] == ["a:1", "b:1"]
    assert last["silent_hosts"] == ["never"] and "never: silent" in r.stderr
    assert time.monotonic() - start < 60


def test_the_remote_command_is_quoted_for_the_remote_shell():
    cmd = remote_command(
        "/opt/gputui bin/gputui", ["check", "--replay", "/r/{host};rm -rf ~"], "node-1"
    )
    assert cmd == "'/opt/gputui bin/gputui' check --replay '/r/node-1;rm -rf ~'"
    argv = ssh_argv("node-1", cmd, connect_timeout=2.5, options=["Port=2222"])
    assert argv[:5] == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3"]
    assert argv[-3:] == ["--", "node-1", cmd] and ["-o", "Port=2222"] == argv[5:7]


def test_srun_and_pdsh_get_their_own_bounds():
    argv = srun_argv(["n1", "n2"], ["gputui", "check", "--json"], jobid="42", timeout=90)
    assert argv[:5] == ["srun", "--overlap", "-N", "2", "--ntasks-per-node=1"]
    assert "--jobid" in argv and argv[-3:] == ["gputui", "check", "--json"]
    p = pdsh_argv(["n1", "n2"], "gputui check --json", fanout=8, connect_timeout=5, timeout=30)
    assert p[:3] == ["pdsh", "-R", "ssh"] and p[-2:] == ["n1,n2", "gputui check --json"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["a", "--", "probe"], "runs check, dump, snapshot"),
        (["a"], "give the command to run after --"),
        (["node[2-1]", "--", "check"], "bad range"),
        (["--fanout", "0", "a", "--", "check"], "must be 1 to 4096"),
    ],
)
def test_bad_fleet_arguments_are_one_line_and_exit_2(args, said):
    r = run_cli("fleet", *args)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------- hostile hosts (issue 34)
#
# A "host" here runs a stand-in for gputui (`--remote-gputui`), through the real ssh and
# sshd: one that prints check lines forever, one that prints a 200,000-deep JSON array, one
# that fails with escapes and a database password on stderr.

CHECK_LINE = '{"t": %d, "state": "ok", "host": "%s", "spinning": [], "reason": "%s"}'


def _stand_in(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    host = "host = sys.argv[sys.argv.index('--host') + 1] if '--host' in sys.argv else 'x'"
    path.write_text(f"#!{sys.executable}\nimport sys\n{host}\n{body}\n")
    path.chmod(0o755)
    return str(path)


MEASURED = (  # argv: result file, then the command's arguments to this Python
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "open(sys.argv[1], 'w').write(f'{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}')\n"
)


def _fleet_measured(
    d: Path, hosts: str, gputui: str, timeout: float, *extra: str
) -> tuple[int, str, str, float, int]:
    """(exit status, stdout, stderr, seconds, peak RSS in MiB) of one `gputui fleet` run.

    The peak is measured by a small Python that forks and execs the fleet: a child that
    pytest's worker started directly inherits the worker's own high-water mark through
    vfork and exec (seen in CI: 300 MiB for a fleet run that peaks at 55)."""
    out, err = d.parent / f"out-{time.monotonic_ns()}", d.parent / f"err-{time.monotonic_ns()}"
    got = d.parent / f"rusage-{time.monotonic_ns()}"
    argv = ["-m", "gputui", "fleet", hosts, "--ssh-config", str(d / "ssh_config")]
    argv += ["--remote-gputui", gputui, "--timeout", str(timeout), "--connect-timeout", "3"]
    start = time.monotonic()
    with open(out, "wb") as o, open(err, "wb") as e:
        subprocess.run(
            [sys.executable, "-c", MEASURED, str(got), *argv, *extra, "--", "check"],
            stdout=o,
            stderr=e,
            timeout=120,
            check=True,
        )
    took = time.monotonic() - start
    rc, maxrss = map(int, got.read_text().split())
    return rc, out.read_text(), err.read_text(), took, maxrss // 1024


def test_a_host_printing_check_lines_forever_is_cut_at_4_mib_within_the_timeout(sshd, tmp_path):
    flood = _stand_in(
        tmp_path,
        "flood",
        "i = 0\nwhile True:\n"
        f"    print({CHECK_LINE!r} % (1795338000 + i, host, 'x' * 200), flush=i % 64 == 0)\n"
        "    i += 1",
    )
    rc, out, err, took, rss = _fleet_measured(sshd, "a,b", flood, 5)
    assert rc == 0, err
    for h in "ab":
        assert f"gputui: {h}: cut off (sent more than 4 MiB: stopped there; the first " in err
    assert "final: ok: no hang on 2 host(s)" in out, out
    assert took < 5 + 10, took  # before: 30 s for one host, 60 s for two
    assert rss < 300, rss  # before: 1.8 GB per host


def test_a_host_printing_slowly_forever_is_cut_at_the_timeout(sshd, tmp_path):
    slow = _stand_in(
        tmp_path,
        "slow",
        "import time\ni = 0\nwhile True:\n"
        f"    print({CHECK_LINE!r} % (1795338000 + i, host, 'slow'), flush=True)\n"
        "    i += 1\n    time.sleep(0.01)",
    )
    rc, out, err, took, _ = _fleet_measured(sshd, "a", slow, 3)
    assert rc == 0, err
    assert "gputui: a: cut off (no result within 3 s); its lines so far are used" in err, err
    assert took < 3 + 10, took


def test_a_host_printing_a_200000_deep_array_sends_unreadable_output(sshd, tmp_path):
    deep = _stand_in(tmp_path, "deep", "print('[' * 200_000 + ']' * 200_000)")
    r = fleet(sshd, "a", "check", gputui=deep, timeout=20)
    assert r.returncode == 2 and "RecursionError" not in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert (
        "gputui: a: silent (done: unreadable output (line 1: JSON nested deeper than 64 levels))"
        in r.stderr
    ), r.stderr


def test_a_failing_hosts_last_words_are_escaped_and_redacted(sshd, tmp_path):
    said = "\\x1b]0;pwned\\x07\\x1b[2J connect to postgres://u:PW0rd7s3cret@db:5432/x failed"
    fail = _stand_in(tmp_path, "fail", f"sys.stderr.write({said!r} + '\\n')\nsys.exit(3)")
    for remote in (("check",), ("snapshot",)):
        r = fleet(sshd, "a", *remote, gputui=fail, timeout=20)
        assert r.returncode == 2, r.stderr
        assert "\x1b" not in r.stderr and "\x07" not in r.stderr, repr(r.stderr)
        assert "PW0rd7s3cret" not in r.stderr, r.stderr
        assert "gputui: a: silent (failed: \\x1b]0;pwned\\x07\\x1b[2J connect to postgres://" in (
            r.stderr
        ), r.stderr


def test_hosts_beyond_the_fanout_share_the_one_deadline(sshd):
    start = time.monotonic()
    r = fleet(
        sshd,
        "never,a",
        "check",
        "--replay",
        "x",
        timeout=3,
        extra=("--fanout", "1", "--connect-timeout", "30"),
    )
    took = time.monotonic() - start
    assert r.returncode == 2, r.stderr
    assert "gputui: never: silent (timeout: no result within 3 s)" in r.stderr, r.stderr
    assert "gputui: a: silent (timeout: not started: the fan-out's --timeout (3 s) ran out" in (
        r.stderr
    ), r.stderr
    assert took < 3 + 10, took
