"""The torch side of the probe, run as `python -m gputui.probe.worker`: the only module that
imports torch.

Why a fork server: importing torch takes 2-7 s (more when several processes import at once on
a small node), far longer than measuring a pair. So one process imports torch once and then
forks a child per pair on request. Each pair child gets its own process group (setpgid,
which the parent kills as a whole on timeout or cancel), forks its second rank, creates the
rendezvous store on a free port (port 0, so no race over a port number) and hands the port to
rank 1 through a pipe. The server stays single-threaded and never touches CUDA, so forking is
safe: each pair child initialises CUDA itself.

Protocol: JSON lines. Parent -> server on stdin: {"cmd": "pair", "id", "a", "b", "size",
"iters", "timeout", "stderr"}. Server -> parent on stdout: {"event": "ready"}, {"event":
"started", "id", "pid"}, the pair's {"event": "result", "id", ...} (written by the pair child
itself, one write of under 4 KiB, so lines never interleave), {"event": "exit", "id",
"status"}. On stdin EOF the server kills every pair group still running and exits.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
import traceback
import warnings
from datetime import timedelta
from typing import Any

from gputui.probe.faults import faults_for

MAX_LINE = 3500  # under PIPE_BUF (4096): one os.write is atomic on a pipe
LATENCY_BYTES = 8
LATENCY_ITERS = 50


def emit(msg: dict[str, Any], fd: int = 1) -> None:
    line = json.dumps(msg, separators=(",", ":"))
    if len(line) > MAX_LINE:
        msg = {k: v for k, v in msg.items() if k not in ("reason", "detail")}
        msg["reason"] = "result line too long (truncated)"
        line = json.dumps(msg, separators=(",", ":"))
    os.write(fd, (line + "\n").encode())


def one_line(text: object, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------- measurements


def _sync(torch: Any, devices: list[Any]) -> None:
    for d in devices:
        if d.type == "cuda":
            torch.cuda.synchronize(d)


def _pattern(torch: Any, n: int, salt: int, device: Any) -> Any:
    """Bytes that catch shifted, dropped or zeroed data: (i + salt) mod 251, a prime period."""
    dtype = torch.int32 if n + salt < 2**31 else torch.int64
    return (torch.arange(n, dtype=dtype, device=device) + salt).remainder_(251).to(torch.uint8)


def measure_copy(
    torch: Any, src: Any, dst: Any, size: int, iters: int, corrupt: bool, salt: int, label: str
) -> tuple[dict[str, Any], str | None]:
    """Copy `size` bytes src -> dst, check every byte on arrival, then time `iters` copies."""
    a = _pattern(torch, size, salt, src)
    b = torch.empty(size, dtype=torch.uint8, device=dst)
    b.copy_(a)
    _sync(torch, [src, dst])
    if corrupt:
        b[size // 3] ^= 0xFF
    expected = _pattern(torch, size, salt, dst)
    bad = b != expected
    nbad = int(bad.sum().item())
    err = None
    if nbad:
        first = int(bad.nonzero()[0].item())
        err = f"copy {label}: {nbad} of {size} bytes differ (first at offset {first})"
    del expected, bad
    t0 = time.perf_counter()
    for _ in range(iters):
        b.copy_(a)
    _sync(torch, [src, dst])
    dt = time.perf_counter() - t0
    return {"gbps": round(size * iters / dt / 1e9, 3), "bytes": size, "ok": err is None}, err


def measure_allreduce(
    torch: Any, dist: Any, rank: int, device: Any, size: int, iters: int, corrupt: bool
) -> tuple[dict[str, Any], str | None]:
    """all_reduce of `size` bytes, result checked exactly, then timed; plus a small message."""
    n = max(1, size // 4)
    idx = torch.arange(n, dtype=torch.int32, device=device).remainder_(7).float()
    x = idx + rank
    dist.all_reduce(x)
    _sync(torch, [device])
    if corrupt and rank == 1:
        x[n // 2] += 1
    expected = idx * 2 + 1  # (i%7 + 0) + (i%7 + 1): exact in float32
    bad = x != expected
    nbad = int(bad.sum().item())
    err = None
    if nbad:
        first = int(bad.nonzero()[0].item())
        err = (
            f"all_reduce on rank {rank}: {nbad} of {n} values wrong (first at {first}: "
            f"{x[first].item():g}, expected {expected[first].item():g})"
        )
    del idx, expected, bad
    x.zero_()
    small = torch.zeros(LATENCY_BYTES // 4, device=device)
    dist.all_reduce(small)  # both ranks start timing together (barrier() guesses the device)
    _sync(torch, [device])
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    _sync(torch, [device])
    dt = time.perf_counter() - t0
    busbw = 4 * n * iters / dt / 1e9  # algbw * 2(n-1)/n, which is 1 for 2 ranks
    for _ in range(5):
        dist.all_reduce(small)
    _sync(torch, [device])
    t0 = time.perf_counter()
    for _ in range(LATENCY_ITERS):
        dist.all_reduce(small)
    _sync(torch, [device])
    lat = (time.perf_counter() - t0) / LATENCY_ITERS * 1e6
    out = {
        "busbw_gbps": round(busbw, 3),
        "latency_us": round(lat, 1),
        "bytes": 4 * n,
        "ok": err is None,
    }
    return out, err


# ----------------------------------------------------------------------- one pair


def _read_line(fd: int, timeout: float) -> str | None:
    """One line from `fd`, or None at EOF or after `timeout` seconds."""
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buf += chunk
    return buf.split(b"\n", 1)[0].decode()


def _hang_forever() -> None:
    while True:  # the injected "hang": only the runner's kill of the group ends this
        time.sleep(3600)


def _rank(
    torch: Any, dist: Any, cmd: dict[str, Any], rank: int, store: Any, faults: set[str]
) -> tuple[dict[str, Any], list[str]]:
    """Join the 2-rank group and run the all_reduce part; returns (figures, errors)."""
    nccl = cmd["backend"] == "nccl"
    dev_index = cmd["a"] if rank == 0 else cmd["b"]
    device = torch.device("cuda", dev_index) if nccl else torch.device("cpu")
    if nccl:
        torch.cuda.set_device(device)
    pg_timeout = timedelta(seconds=cmd["pg_timeout"])
    dist.init_process_group(
        cmd["backend"], store=store, rank=rank, world_size=2, timeout=pg_timeout
    )
    if "hang" in faults:
        _hang_forever()
    figures, err = measure_allreduce(
        torch, dist, rank, device, cmd["size"], cmd["iters"], "corrupt" in faults
    )
    dist.destroy_process_group()
    return figures, [err] if err else []


def run_pair(torch: Any, cmd: dict[str, Any]) -> int:
    """Rank 0 of one pair (already leading its own process group): fork rank 1, rendezvous, measure
    all_reduce on both ranks, then both copy directions here, and emit one result line."""
    import torch.distributed as dist

    t0 = time.monotonic()
    a, b = cmd["a"], cmd["b"]
    faults = faults_for(a, b)
    if "exit" in faults:
        print(f"injected fault: pair {a}-{b} worker exits with status 3", file=sys.stderr)
        return 3
    port_r, port_w = os.pipe()
    res_r, res_w = os.pipe()
    pid1 = os.fork()
    if pid1 == 0:  # rank 1
        code = 1
        try:
            os.close(port_w)
            os.close(res_r)
            port = _read_line(port_r, cmd["pg_timeout"])
            if port is None:
                raise RuntimeError("rank 0 never sent the rendezvous port")
            store = dist.TCPStore(
                "127.0.0.1", int(port), 2, False, timeout=timedelta(seconds=cmd["pg_timeout"])
            )
            _, errs = _rank(torch, dist, cmd, 1, store, faults)
            emit({"ok": not errs, "errors": errs}, fd=res_w)
            code = 0
        except BaseException as e:
            traceback.print_exc()
            emit({"ok": False, "errors": [f"rank 1: {one_line(e)}"]}, fd=res_w)
        finally:
            os._exit(code)
    os.close(port_r)
    os.close(res_w)
    result: dict[str, Any] = {"event": "result", "id": cmd["id"], "copy": [], "ok": False}
    errors: list[str] = []
    try:
        store = dist.TCPStore(
            "127.0.0.1",
            0,
            2,
            True,
            wait_for_workers=False,
            timeout=timedelta(seconds=cmd["pg_timeout"]),
        )
        os.write(port_w, f"{store.port}\n".encode())
        figures, errs = _rank(torch, dist, cmd, 0, store, faults)
        errors += errs
        peer = _read_line(res_r, cmd["pg_timeout"])
        peer_msg: dict[str, Any] = (
            json.loads(peer) if peer else {"ok": False, "errors": ["rank 1 sent nothing"]}
        )
        errors += peer_msg.get("errors", [])
        figures["ok"] = figures["ok"] and bool(peer_msg.get("ok"))
        result["allreduce"] = figures
        nccl = cmd["backend"] == "nccl"
        da = torch.device("cuda", a) if nccl else torch.device("cpu")
        db = torch.device("cuda", b) if nccl else torch.device("cpu")
        for s, d, ds, dd, salt in ((a, b, da, db, 17), (b, a, db, da, 91)):
            fig, err = measure_copy(
                torch, ds, dd, cmd["size"], cmd["iters"], "corrupt" in faults, salt, f"{s}->{d}"
            )
            if err:
                errors.append(err)
            result["copy"].append({"src": s, "dst": d, **fig})
    except Exception as e:
        errors.append(f"{type(e).__name__}: {one_line(e)}")
        traceback.print_exc()
    finally:
        _reap(pid1, 2.0)
    result["ok"] = not errors
    if errors:
        checks = [e for e in errors if "differ" in e or "values wrong" in e]
        head = "data check failed: " if checks and len(checks) == len(errors) else ""
        result["reason"] = one_line(head + "; ".join(errors), 600)
    result["elapsed_s"] = round(time.monotonic() - t0, 3)
    emit(result)
    return 0


def _reap(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


# ----------------------------------------------------------------------- the fork server


def _start_pair(torch: Any, cmd: dict[str, Any]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        try:
            os.setpgid(pid, pid)  # here too, so the group exists before "started" is sent
        except OSError:
            pass  # the child did it first (or already exited)
        return pid
    code = 1
    try:
        os.setpgid(0, 0)  # its own process group: the parent kills the pair (both ranks) at once
        fd = os.open(cmd["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 2)
        os.close(fd)
        if cmd["backend"] == "gloo":
            torch.set_num_threads(1)
        code = run_pair(torch, cmd)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def serve() -> int:
    warnings.filterwarnings("ignore")  # torch's "NumPy not found" and friends: not ours
    import torch
    import torch.distributed  # noqa: F401  (imported once here, not in every pair)

    _become_subreaper()
    emit({"event": "ready", "pid": os.getpid(), "torch": torch.__version__})
    children: dict[int, int] = {}  # pid -> pair id
    buf = b""
    eof = False
    while not eof:
        ready = select.select([0], [], [], 0.05)[0]
        _reap_children(children)
        if not ready:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            eof = True
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            cmd = json.loads(line)
            if cmd.get("cmd") == "pair":
                pid = _start_pair(torch, cmd)
                children[pid] = cmd["id"]
                emit({"event": "started", "id": cmd["id"], "pid": pid})
    for pid in list(children):  # the parent went away or is done: leave nothing behind
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        _reap_children(children)
        try:
            os.waitpid(-1, os.WNOHANG)  # raises once no child at all is left
        except ChildProcessError:
            break
        time.sleep(0.02)
    return 0


def _reap_children(children: dict[int, int]) -> None:
    """Reap every exited child (pairs, and rank-1 orphans: this is their subreaper)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        pair_id = children.pop(pid, None)
        if pair_id is not None:
            emit({"event": "exit", "id": pair_id, "status": os.waitstatus_to_exitcode(status)})


def _become_subreaper() -> None:
    """Orphaned rank-1 processes (rank 0 killed first) are reparented here and reaped, instead
    of lingering as zombies under a PID 1 that may never reap them (containers)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def main() -> int:
    try:
        return serve()
    except ModuleNotFoundError as e:
        if e.name == "torch":
            print("torch is not installed: pip install 'gputui[probe]'", file=sys.stderr)
            return 3
        raise


if __name__ == "__main__":
    sys.exit(main())
