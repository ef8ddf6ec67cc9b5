"""The hostile sweep's round-four families (issue 43): trust, time, files, text, endless input.

Each try is a real thing done to gputui and judged by what must hold:

- `ras-trust` (root): a fake NCCL RAS listener run as uid 65534 on loopback, answering with
  one of the recorded answers (tests/data/ras) naming the job's real pids, pid 1 or random
  ones, before a job of two real ranks: the gatherer must call it untrusted and its
  explanation name no pid and no rank. Also the job's own user's listener that is no rank,
  naming a larger world than the job's: refused.
- `slow-server`: a real HTTP server on loopback that trickles its status line, headers, a
  chunk-size line or the body at random rates; the debug server client must end at its one
  deadline (a random 0.5-2 s), or within a poll of a random cancel.
- `bundle-links`: `bundle --demo --out P` where a random component of P is a link (to a
  directory standing for /etc, dangling, a loop): refused in one line, nothing made through
  it; and the partial directory swapped for one of links at a random moment of the write:
  the file the links point at stays as it was.
- `fr-files`: the flight recorder's opener on what a job's user can put at its dump path (a
  link to a root file, a link chain, a FIFO, a directory, a device, another user's file, a
  hard link): only the user's own regular file is opened.
- `text-marks`: random text of printable words, zero-width and bidi marks, C0/C1 controls,
  OSC and CSI sequences, lone surrogates, through `clean()` and `snapshot`'s text job line:
  nothing a terminal would act on, or draw in no cell, comes out raw.
- `endless`: `merge` on gzips of blank lines (up to 1 GiB uncompressed) and on standard
  input that never ends (blank, `x`, `{}` lines): one line, exit 2, within the bound.

A try returns (outcome, detail): outcome "held" or a failure word.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

Try = tuple[str, Callable[[], tuple[str, str]]]  # (name, the try)
NOBODY = 65534
HELD = "held"


def _as_nobody() -> None:
    os.setgid(NOBODY)
    os.setuid(NOBODY)


# ---------------------------------------------------------------- ras-trust

FAKE = r"""
import socket, sys
answer = sys.stdin.buffer.read()
srv = socket.create_server(("127.0.0.1", 0))
print(srv.getsockname()[1], flush=True)
while True:
    conn, _ = srv.accept()
    got = b""
    while b"STATUS\n" not in got:
        chunk = conn.recv(4096)
        if not chunk:
            break
        got += chunk
    conn.sendall(answer)
    conn.close()
"""


def _rank(env: dict[str, str]) -> subprocess.Popen:
    code = "import sys\nprint('ready', flush=True)\nsys.stdin.read()\n"
    p = subprocess.Popen(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def _ras_answer(rnd: random.Random, pids: list[int]) -> bytes:
    files = sorted((ROOT / "tests" / "data" / "ras").glob("*-4rank.json"))
    text = rnd.choice(files).read_text()
    for old in ("907", "908", "909", "910"):
        new = rnd.choice([*pids, 1, rnd.randrange(2, 1 << 22)])
        text = text.replace(f'"pid": {old}', f'"pid": {new}')
    return text.encode()


def _ras_try(rnd: random.Random, as_nobody: bool) -> tuple[str, str]:
    import psutil

    from gputui.collect.model import ProcessInfo, RankInfo
    from gputui.diagnose.nccl.ras import explain_nccl
    from gputui.diagnose.verdict import Verdict
    from gputui.tools.gather.nccl import gather_nccl
    from gputui.watch.watcher import JobTarget

    python = "/usr/bin/python3" if as_nobody else sys.executable
    probe = [_rank({}) for _ in range(2)]  # pids the fake may name (the job's own, below)
    pids = [p.pid for p in probe]
    fake = subprocess.Popen(
        [python, "-c", FAKE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        preexec_fn=_as_nobody if as_nobody else None,  # noqa: PLW1509
        cwd="/",
    )
    kids: list[subprocess.Popen] = []
    try:
        assert fake.stdin is not None and fake.stdout is not None
        fake.stdin.write(_ras_answer(rnd, pids))
        fake.stdin.close()
        port = int(fake.stdout.readline())
        env = {"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}
        kids = [_rank(env) for _ in range(2)]
        world = 2
        procs = tuple(
            ProcessInfo(
                pid=k.pid,
                create_time=psutil.Process(k.pid).create_time(),
                gpus=(i,),
                rank=RankInfo(rank=i, world_size=world),
            )
            for i, k in enumerate(kids)
        )
        v = Verdict(t=1.0, state="stalled", spinning=(0,), suspects=(1,))
        target = JobTarget(key="j", label="job", trigger="stalled", verdict=v, ranks=procs)
        rec = gather_nccl(target, threading.Event(), ras_interval=0.1)
        assert rec is not None
        rec["ras"]["nccl"] = {"loaded": True, "version": "2.28.9"}
        outcomes = [q["outcome"] for q in rec["ras"]["queries"]]
        ev = explain_nccl(json.loads(json.dumps(rec)), v, None)
        if any(o == "done" for o in outcomes):
            return "trusted", f"outcomes {outcomes}"
        if ev.suspect_pids or any(f.ranks for f in ev.ranked):
            return "blamed", f"{ev.suspect_pids} {ev.findings[:1]}"
        return HELD, outcomes[0]
    finally:
        for p in (fake, *probe, *kids):
            p.kill()
            p.wait(10)


def ras_trust(n: int, seed: int = 43) -> Iterator[Try]:
    rnd = random.Random(seed)
    root = os.geteuid() == 0
    for k in range(n):
        nobody = root and k % 4 != 3  # every fourth: the same user's fake, no rank
        r = random.Random(rnd.random())
        yield (
            f"ras-trust.{'nobody' if nobody else 'same-user'}.{k}",
            lambda r=r, nobody=nobody: _ras_try(r, nobody),
        )


# ---------------------------------------------------------------- slow-server

TRICKLE_KINDS = ("status", "headers", "many-headers", "chunk-size", "body")


def _heads(kind: str) -> tuple[bytes, bytes]:
    return {
        "status": (b"", b"HTTP/1.1 200 OK" + b" " * 100_000),
        "headers": (b"HTTP/1.1 200 OK\r\n", b"X-A: " + b"a" * 100_000),
        "many-headers": (b"HTTP/1.1 200 OK\r\n", b"X-A: 1\r\n" * 20_000),
        "chunk-size": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"0" * 100_000),
        "body": (b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n", b"x" * 100_000),
    }[kind]


def _slow_try(kind: str, rate: float, limit: float, cancel_at: float | None) -> tuple[str, str]:
    from gputui.collect.nccl.debugserver_ask import Fetch
    from gputui.collect.nccl.debugserver_find import Candidate

    head, trickle = _heads(kind)
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        with conn:
            try:
                conn.recv(4096)
                conn.sendall(head)
                for b in trickle:
                    if stop.wait(rate):
                        return
                    conn.sendall(bytes([b]))
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    cancel = threading.Event()
    if cancel_at is not None:
        threading.Timer(cancel_at, cancel.set).start()
    c = Candidate("127.0.0.1", srv.getsockname()[1], "sweep")
    t0 = time.monotonic()
    out: dict[str, object] = {}

    def fetch() -> None:
        try:
            out["answer"] = Fetch(cancel)(c, "/stacks", limit, 1 << 20)
        except OSError as e:
            out["error"] = e

    th = threading.Thread(target=fetch, daemon=True)
    th.start()
    th.join(limit + 10)
    took = time.monotonic() - t0
    stop.set()
    srv.close()
    if th.is_alive():
        return "hang", f"{kind} at {rate:g} s/byte still read after {took:.0f} s"
    end = min(limit, cancel_at) if cancel_at is not None else limit
    if "answer" in out:
        return "wrong outcome", "an answer from a trickle"
    if took > end + 2.0:
        return "late", f"{kind}: ended at {took:.1f} s, deadline {end:g} s"
    return HELD, f"{kind}: {took:.2f} s ({type(out.get('error')).__name__})"


def slow_server(n: int, seed: int = 43) -> Iterator[Try]:
    rnd = random.Random(seed)
    for k in range(n):
        kind = TRICKLE_KINDS[k % len(TRICKLE_KINDS)]
        rate = rnd.choice([0.01, 0.05, 0.2, 0.5])
        limit = rnd.uniform(0.5, 2.0)
        cancel_at = rnd.uniform(0.05, 1.0) if rnd.random() < 0.3 else None
        yield (
            f"slow-server.{kind}.{k}",
            lambda a=(kind, rate, limit, cancel_at): _slow_try(*a),
        )


# ---------------------------------------------------------------- bundle-links


def _bundle_cli(tmp: Path, rnd: random.Random, k: int) -> tuple[str, str]:
    base = tmp / f"bl{k}"
    victim = base / "etc"
    victim.mkdir(parents=True)
    depth = rnd.randrange(0, 3)
    parts = [f"d{i}" for i in range(depth)]
    here = base
    for p in parts:
        here = here / p
        here.mkdir()
    kind = rnd.choice(["dir", "dangling", "loop", "final"])
    link = here / "link"
    if kind == "dir":
        link.symlink_to(victim)
    elif kind == "dangling":
        link.symlink_to(victim / "nowhere")
    elif kind == "loop":
        link.symlink_to(link)
    else:
        link.symlink_to(victim / "x")
    tail = [] if kind == "final" else ["x", *(["y"] if rnd.random() < 0.5 else [])]
    out = Path(link, *tail)
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "bundle", "--demo", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tempfile.gettempdir(),
    )
    made = list(victim.iterdir()) + list((victim / "nowhere").parent.glob("nowhere*"))
    if made:
        return "wrote through a link", f"{out}: {made[:3]}"
    if r.returncode != 2 or "Traceback" in r.stderr or r.stderr.count("\n") != 1:
        return "bad error", f"exit {r.returncode}: {r.stderr[-200:]}"
    return HELD, r.stderr.strip()[-80:]


def _bundle_swap(tmp: Path, rnd: random.Random, k: int) -> tuple[str, str]:
    from gputui.collect.source import demo_path
    from gputui.collect.trace.read import read_trace
    from gputui.errors import GputuiError
    from gputui.tools.bundle.write import write_bundle

    base = tmp / f"bs{k}"
    shared = base / "shared"
    shared.mkdir(parents=True)
    victim = base / "root-file"
    victim.write_text("root's own\n")
    snaps = read_trace(demo_path())[-20:]
    names = ["processes.json", "verdict.json", "README.txt", "host.json", "health.json",
             "trace.jsonl.gz", "topology.txt", "stacks"]  # fmt: skip
    links = rnd.sample(names, rnd.randrange(1, len(names) + 1))
    swapped: list[str] = []

    def swap(_line: str) -> None:  # said once, as the samples are written: mid-write
        for partial in shared.glob(".b.partial-*"):
            partial.rename(shared / "moved")
            partial.mkdir()
            for name in links:
                (partial / name).symlink_to(victim)
            swapped.append(partial.name)

    try:
        write_bundle(shared / "b", snapshots=snaps, processes=[], on_line=swap)
        outcome = "finished"
    except GputuiError as e:
        outcome = str(e)[-60:]
    if victim.read_text() != "root's own\n":
        return "wrote through a link", outcome
    if not swapped:
        return "not tried", "the write said no line: nothing was swapped"
    return HELD, outcome


def bundle_links(n: int, tmp: Path, seed: int = 43) -> Iterator[Try]:
    rnd = random.Random(seed)
    for k in range(n):
        r = random.Random(rnd.random())
        if k % 2:
            yield f"bundle-links.swap.{k}", lambda r=r, k=k: _bundle_swap(tmp, r, k)
        else:
            yield f"bundle-links.out.{k}", lambda r=r, k=k: _bundle_cli(tmp, r, k)


# ---------------------------------------------------------------- fr-files


def _fr_try(tmp: Path, kind: str, k: int) -> tuple[str, str]:
    from gputui.collect.nccl.fr_dumps import open_owned

    d = tmp / f"fr{k}"
    d.mkdir()
    secret = d / "secret"
    secret.write_text("secret\n")
    secret.chmod(0o600)
    path = d / "dump_0"
    job_uid = NOBODY if os.geteuid() == 0 else os.geteuid()
    own = False
    if kind == "link-to-root-file":
        path.symlink_to(secret)
    elif kind == "link-chain":
        (d / "a").symlink_to(secret)
        path.symlink_to(d / "a")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "other-users-file":
        path.write_text("x")
    elif kind == "hard-link":
        try:
            os.link(secret, path)
        except OSError as e:
            return HELD, f"no hard link here ({e.strerror})"
    else:  # the job's own file: must open
        path.write_text("dump")
        if os.geteuid() == 0:
            os.chown(path, job_uid, job_uid)
        own = True
    try:
        fd = open_owned(str(path), job_uid)
    except OSError as e:
        return (HELD, f"refused: {e.strerror or e}") if not own else ("refused its own", str(e))
    os.close(fd)
    return (HELD, "opened its own") if own else ("opened", kind)


FR_KINDS = (
    "link-to-root-file", "link-chain", "fifo", "directory", "device", "other-users-file",
    "hard-link", "own",
)  # fmt: skip


def fr_files(n: int, tmp: Path) -> Iterator[Try]:
    for k in range(n):
        kind = FR_KINDS[k % len(FR_KINDS)]
        yield f"fr-files.{kind}.{k}", lambda kind=kind, k=k: _fr_try(tmp, kind, k)


# ---------------------------------------------------------------- text-marks

PIECES = (
    "rank", "ランク", "الرتبة", "🙂", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u061c",
    "\u2060", "\ufeff", "\u202a", "\u202e", "\u2066", "\u2069", "\x1b]0;owned\x07", "\x1b[2J",
    "\x9b31m", "\x9d0;x\x9c", "\x07", "\r", "\n", "\t", "\x00", "\ud800", "\u2028", " ",
)  # fmt: skip


def _text_try(rnd: random.Random) -> tuple[str, str]:
    from hostile_harness import raw_control

    from gputui.collect.model import ProcessInfo, RankInfo, Snapshot
    from gputui.collect.procs.jobs import group_jobs
    from gputui.commands.snapshot import snapshot_to_text
    from gputui.textsafe import _UNSAFE, clean

    text = "".join(rnd.choice(PIECES) for _ in range(rnd.randrange(1, 12)))
    shown = clean(text)
    if _UNSAFE.search(shown):
        return "raw mark", repr(shown)
    field = rnd.choice(["run_id", "master", "slurm_job_id"])
    rank = RankInfo(rank=0, world_size=2, **{field: text})
    procs = tuple(
        ProcessInfo(pid=100 + i, ppid=1, gpus=(i,), cmdline=("python", text), rank=rank)
        for i in range(2)
    )
    out = snapshot_to_text(Snapshot(t=0.0, processes=procs, jobs=group_jobs(procs)))
    bad = raw_control(out)
    if bad is not None or _UNSAFE.search(out.replace("\n", "")):
        return "raw in snapshot", f"{field}: {bad or repr(out[-120:])}"
    return HELD, field


def text_marks(n: int, seed: int = 43) -> Iterator[Try]:
    rnd = random.Random(seed)
    for k in range(n):
        r = random.Random(rnd.random())
        yield f"text-marks.{k}", lambda r=r: _text_try(r)


# ---------------------------------------------------------------- endless


def _merge(argv: list[str], feed: bytes | None, bound: float) -> tuple[str, str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "gputui", "merge", *argv],
        stdin=subprocess.PIPE if feed is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tempfile.gettempdir(),
        start_new_session=True,
    )
    stop = threading.Event()

    def writer() -> None:
        assert p.stdin is not None and feed is not None
        block = feed * 8192
        try:
            while not stop.is_set():
                p.stdin.write(block)
        except (OSError, ValueError):
            pass

    if feed is not None:
        threading.Thread(target=writer, daemon=True).start()
    t0 = time.monotonic()
    try:
        rc = p.wait(timeout=bound)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return "hang", f"still reading after {bound:g} s"
    finally:
        stop.set()
    err = p.stderr.read().decode() if p.stderr else ""
    took = time.monotonic() - t0
    if rc != 2 or "Traceback" in err or err.count("\n") != 1:
        return "bad error", f"exit {rc}: {err[-200:]}"
    return HELD, f"{took:.1f} s: {err.strip()[-70:]}"


def endless(tmp: Path, bound: float) -> Iterator[Try]:
    for mib in (1, 16, 256, 1024):
        f = tmp / f"blank-{mib}.gz"
        if not f.exists():
            with gzip.open(f, "wb", compresslevel=1) as g:
                block = b"\n" * (1 << 20)
                for _ in range(mib):
                    g.write(block)
        yield f"endless.gzip-{mib}MiB-newlines", lambda f=f: _merge([str(f)], None, bound)
    for line in (b"\n", b"  \n", b"\r\n", b"x\n", b"{}\n", b"[]\n", b'{"t": 1}\n'):
        yield f"endless.stdin-{line!r}", lambda line=line: _merge(["-"], line, bound)


FAMILIES = ("ras-trust", "slow-server", "bundle-links", "fr-files", "text-marks", "endless")


def tries(names: list[str], tmp: Path, n: int, bound: float) -> list[tuple[str, Try]]:
    """(family, try) of the round-four families named; `n` scales the random ones."""
    out: list[tuple[str, Try]] = []
    if "ras-trust" in names:
        out += [("ras-trust", t) for t in ras_trust(max(4, n // 5))]
    if "slow-server" in names:
        out += [("slow-server", t) for t in slow_server(max(5, n // 4))]
    if "bundle-links" in names:
        out += [("bundle-links", t) for t in bundle_links(max(4, n // 5), tmp)]
    if "fr-files" in names:
        out += [("fr-files", t) for t in fr_files(max(8, n // 5), tmp)]
    if "text-marks" in names:
        out += [("text-marks", t) for t in text_marks(n)]
    if "endless" in names:
        out += [("endless", t) for t in endless(tmp, bound)]
    return out


def run_try(t: Try) -> tuple[str, str, float]:
    name, fn = t
    t0 = time.monotonic()
    try:
        outcome, detail = fn()
    except Exception as e:  # the try itself broke: counted, never hidden
        outcome, detail = "error in the try", f"{type(e).__name__}: {e}"
    return outcome, detail, time.monotonic() - t0
