"""The host side of the world probe: `gputui probe --world-worker SPEC`, one per host.

Started by the launcher (ssh, srun, pdsh) with one JSON argument. It leads its own process
group, imports torch once, joins the host rendezvous on the first host's TCPStore (each host
writes `host/I` with its rank count; all wait for all, bounded), then forks one rank per GPU
(or one gloo rank on CPU when the host has none). Every rank joins the world through the same
store and measures a barrier and all_reduce of each size, checked exactly. The host process
reports JSON lines on stdout (`start`, `error`, `rendezvous`, `rank`, `nccl`, `done`).

Why it polices itself: the launcher may lose the connection, or the user's machine may die,
and a rank blocked in NCCL ignores everything. A watchdog thread kills the whole group at the
spec's deadline, and (under ssh) as soon as stdin reaches EOF, which is what a dropped or
killed ssh session looks like on this side. Nothing is left on the host either way.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

from gputui.probe.runner import GPU_ENV
from gputui.probe.worker import emit as _emit
from gputui.probe.worker import one_line
from gputui.probe.world.nccl import parse_nccl_log

EXIT_FAILED = 1
EXIT_NO_TORCH = 3
_INDEX: list[int | None] = [None]


def emit(msg: dict[str, Any], fd: int = 1) -> None:
    """A JSON line; host events carry the host's index (srun interleaves hosts' output)."""
    if fd == 1 and _INDEX[0] is not None:
        msg = {**msg, "i": _INDEX[0]}
    _emit(msg, fd)


def _watchdog(deadline: float, watch_stdin: bool) -> None:
    """Kill this process group at `deadline` (monotonic), or when stdin closes (ssh gone)."""

    def run() -> None:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if watch_stdin:
                try:
                    r = select.select([0], [], [], min(left, 0.5))[0]
                    if r and not os.read(0, 4096):
                        break
                except OSError:
                    break
            else:
                time.sleep(min(left, 0.5))
        try:
            os.killpg(os.getpgid(0), signal.SIGKILL)
        finally:
            os._exit(EXIT_FAILED)

    threading.Thread(target=run, daemon=True).start()


def _fault(spec: dict[str, Any]) -> str:
    """The injected fault for this host (tests only: GPUTUI_WORLD_FAULT in the parent)."""
    return str(spec.get("fault") or "") if spec.get("fault_host") == spec.get("name") else ""


def _my_index(spec: dict[str, Any]) -> int | None:
    """The host's place in the list: given (ssh), or its name as the launcher put it in
    (pdsh's %h), else found from this host's own names (srun)."""
    if spec.get("index") is not None:
        return int(spec["index"])
    if spec.get("name") in spec["hosts"]:
        return int(spec["hosts"].index(spec["name"]))
    names = {socket.gethostname(), socket.gethostname().split(".")[0], socket.getfqdn()}
    names.add(os.environ.get("SLURMD_NODENAME", ""))
    for i, h in enumerate(spec["hosts"]):
        if h in names:
            return i
    return None


def _wait_keys(store: Any, keys: list[str], timeout: float) -> list[str]:
    """The keys still missing after `timeout` seconds ([] when all arrived)."""
    deadline = time.monotonic() + timeout
    while True:
        missing = [k for k in keys if not store.check([k])]
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.05)


def _connect(dist: Any, spec: dict[str, Any], master: bool) -> Any:
    kw = {"timeout": timedelta(seconds=spec["rdzv_timeout"])}
    if master:
        return dist.TCPStore(spec["master"], spec["port"], None, True, wait_for_workers=False, **kw)
    return dist.TCPStore(spec["master"], spec["port"], None, False, **kw)


def _store_error(e: BaseException, spec: dict[str, Any], master: bool) -> str:
    text = one_line(str(e), 400).lower()
    where = f"{spec['master']}:{spec['port']}"
    if master and ("in use" in text or "eaddrinuse" in text):
        return f"port {spec['port']} is in use on this host (rendezvous cannot listen)"
    if master:
        return f"cannot listen on {where}: {one_line(str(e), 200)}"
    why = "connection refused" if "refused" in text else "timed out" if "time" in text else ""
    return f"cannot reach {where} ({why or one_line(str(e), 200)})"


# ----------------------------------------------------------------------- one rank


def _rank_main(torch: Any, spec: dict[str, Any], rank: int, local: int, world: dict, fd: int):
    """One rank: join the world, barrier, all_reduce of each size; one JSON line to `fd`."""
    import torch.distributed as dist

    out: dict[str, Any] = {"rank": rank, "local": local, "ok": False, "sizes": []}
    nccl = world["backend"] == "nccl"
    try:
        fault = _fault(spec)
        device = torch.device("cuda", local) if nccl else torch.device("cpu")
        if nccl:
            torch.cuda.set_device(device)
        else:
            torch.set_num_threads(1)
        t0 = time.monotonic()
        store = dist.PrefixStore(f"w{spec['token']}", _connect(dist, spec, False))
        dist.init_process_group(
            world["backend"],
            store=store,
            rank=rank,
            world_size=world["size"],
            timeout=timedelta(seconds=spec["pg_timeout"]),
        )
        out["init_s"] = round(time.monotonic() - t0, 3)
        if nccl:  # here, after CUDA is up in this rank: never in the forking host process
            v = torch.cuda.nccl.version()
            out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        if fault == "kill" and local == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "hang" and local == 0:
            while True:
                time.sleep(3600)
        small = torch.zeros(2, device=device)
        t0 = time.monotonic()
        dist.all_reduce(small)  # the barrier (dist.barrier guesses the device on NCCL)
        if nccl:
            torch.cuda.synchronize()
        out["barrier_s"] = round(time.monotonic() - t0, 4)
        w = world["size"]
        for size in spec["sizes"] if nccl else spec.get("gloo_sizes") or spec["sizes"]:
            n = max(1, size // 4)
            x = torch.full((n,), float(rank + 1), device=device)
            dist.all_reduce(x)
            if nccl:
                torch.cuda.synchronize()
            want = float(w * (w + 1) // 2)
            bad = int((x != want).sum().item())
            t0 = time.perf_counter()
            for _ in range(spec["iters"]):
                dist.all_reduce(x)
            if nccl:
                torch.cuda.synchronize()
            dt = (time.perf_counter() - t0) / spec["iters"]
            algbw = 4 * n / dt / 1e9
            bus = algbw * (2 * (w - 1) / w if w > 1 else 1.0)
            out["sizes"].append(
                {
                    "bytes": 4 * n,
                    "busbw_gbps": round(bus, 3),
                    "time_us": round(dt * 1e6, 1),
                    "ok": bad == 0,
                    "wrong": bad,
                }
            )
        dist.destroy_process_group()
        out["ok"] = all(s["ok"] for s in out["sizes"])
        if not out["ok"]:
            out["why"] = "all_reduce returned wrong values"
    except Exception as e:
        out["why"] = one_line(f"{type(e).__name__}: {e}", 400)
        traceback.print_exc()
    emit(out, fd=fd)
    return 0 if out["ok"] else 1


# ----------------------------------------------------------------------- the host


def _fork_ranks(torch: Any, spec: dict, base: int, n: int, world: dict, tmp: Path) -> dict:
    """{pid: (rank, local, stderr path, read fd)}; each rank's stderr goes to its own file."""
    kids = {}
    for local in range(n):
        r, w = os.pipe()
        err = tmp / f"rank{base + local}.err"
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(r)
                fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 2)
                os.dup2(fd, 1)  # NCCL's INFO lines go to stdout: the log, not the event stream
                code = _rank_main(torch, spec, base + local, local, world, w)
            finally:
                sys.stderr.flush()
                os._exit(code)
        os.close(w)
        kids[pid] = (base + local, local, err, r)
    return kids


def _collect(kids: dict, limit: float) -> list[dict[str, Any]]:
    """Every rank's line, or why it has none (crashed, killed, over time: then killed)."""
    deadline = time.monotonic() + limit
    status: dict[int, int] = {}
    while len(status) < len(kids) and time.monotonic() < deadline:
        for pid in kids:
            if pid not in status:
                done, st = os.waitpid(pid, os.WNOHANG)
                if done:
                    status[pid] = os.waitstatus_to_exitcode(st)
        time.sleep(0.02)
    out = []
    for pid, (rank, local, err, fd) in kids.items():
        if pid not in status:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raw = b""
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            raw += chunk
        os.close(fd)
        line = raw.decode("utf-8", "replace").strip()
        try:
            msg = json.loads(line) if line else {}
        except ValueError:
            line, msg = "", {}
        msg = msg or {"rank": rank, "local": local, "ok": False}
        code = status.get(pid)
        if not line:
            last = _last_line(err)
            if code is None:
                msg["why"] = f"no result within {limit:.1f} s (killed)"
            elif code < 0:
                msg["why"] = f"killed by {_signal_name(-code)}"
            else:
                msg["why"] = f"exited {code}" + (f": {last}" if last else "")
        msg["nccl_log"] = str(err)
        out.append(msg)
    return out


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return one_line(next((ln for ln in reversed(lines) if ln.strip()), ""), 300)


def host_main(spec: dict[str, Any]) -> int:
    try:
        os.setpgid(0, 0)  # lead a group: the watchdog and the reaper kill it whole
    except OSError:
        pass
    start = time.monotonic()
    _watchdog(start + spec["deadline"], bool(spec.get("watch_stdin")))
    host = spec.get("name") or socket.gethostname()
    idx = _my_index(spec)
    _INDEX[0] = idx
    emit({"event": "start", "host": host, "index": idx, "pid": os.getpid()})
    if idx is None:
        emit({"event": "error", "stage": "launch", "why": "this host is not in the host list"})
        return EXIT_FAILED
    if _fault(spec) == "exit":
        emit({"event": "error", "stage": "launch", "why": "injected fault: the host exits"})
        return EXIT_FAILED
    from gputui.probe.topology import gpu_count
    from gputui.probe.world.busy import busy_gpus

    ngpu = 0 if spec["backend"] == "gloo" else gpu_count()[0]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and ngpu:  # ranks use CUDA indices: only the visible ones exist
        ngpu = min(ngpu, len([v for v in visible.split(",") if v.strip()]))
    n = min(ngpu, spec.get("gpus_per_host") or ngpu) if ngpu else 1
    mine = list(range(n)) if ngpu else []
    busy = {} if spec.get("force") else busy_gpus(mine, spec["token"])
    if busy:
        who = "; ".join(f"GPU {g} is in use by {', '.join(w)}" for g, w in sorted(busy.items()))
        emit({"event": "error", "stage": "busy", "why": f"{who}; --force to probe anyway"})
        return EXIT_FAILED
    warnings.filterwarnings("ignore")
    try:  # after the refusal: a busy host is told without waiting seconds for torch
        import torch
        import torch.distributed as dist
    except ModuleNotFoundError as e:
        emit({"event": "error", "stage": "torch", "why": f"no torch on this host ({e.name})"})
        return EXIT_NO_TORCH
    t0 = time.monotonic()
    try:
        store = _connect(dist, spec, idx == 0)
        key = f"{spec['token']}/host/{idx}"
        store.set(key, json.dumps({"ranks": n, "gpus": ngpu, "host": host}))
    except Exception as e:
        emit({"event": "error", "stage": "rendezvous", "why": _store_error(e, spec, idx == 0)})
        return EXIT_FAILED
    keys = [f"{spec['token']}/host/{i}" for i in range(len(spec["hosts"]))]
    missing = _wait_keys(store, keys, max(0.0, spec["rdzv_timeout"] - (time.monotonic() - t0)))
    joined_s = round(time.monotonic() - t0, 3)
    if missing:
        names = [spec["hosts"][keys.index(k)] for k in missing]
        emit({"event": "rendezvous", "ok": False, "joined_s": joined_s, "missing": names})
        return EXIT_FAILED
    infos = [json.loads(store.get(k)) for k in keys]
    base = sum(i["ranks"] for i in infos[:idx])
    gpu_world = spec["backend"] != "gloo" and all(i["gpus"] for i in infos)
    world = {"size": sum(i["ranks"] for i in infos), "backend": "nccl" if gpu_world else "gloo"}
    emit(
        {
            "event": "rendezvous",
            "ok": True,
            "joined_s": joined_s,
            "base": base,
            "ranks": n,
            "gpus": ngpu,
            "world": world["size"],
            "backend": world["backend"],
            "torch": torch.__version__,
        }
    )
    for k, v in GPU_ENV.items():  # NVLink multicast off, CUDA order = NVML order, as the probe
        os.environ.setdefault(k, v)
    if world["backend"] == "nccl":
        os.environ.setdefault("NCCL_DEBUG", "INFO")
        os.environ.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET,GRAPH,ENV")
    if spec.get("hostid"):  # aliases of one machine count as separate hosts (tests only)
        os.environ["NCCL_HOSTID"] = host
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gputui-world-") as tmp:
        kids = _fork_ranks(torch, spec, base, n, world, Path(tmp))
        limit = max(1.0, spec["deadline"] - (time.monotonic() - start) - 2.0)
        ranks = _collect(kids, limit)
        nccl = parse_nccl_log([Path(r.pop("nccl_log")) for r in ranks])
    for r in ranks:
        emit({"event": "rank", **r})
    if world["backend"] == "nccl" or nccl.get("version"):
        emit({"event": "nccl", **nccl})
    ok = all(r["ok"] for r in ranks)
    try:  # the first host holds the store: it leaves last, so no one loses it mid-run
        store.set(f"{spec['token']}/done/{idx}", "1")
        if idx == 0:
            left = min(10.0, max(0.5, spec["deadline"] - (time.monotonic() - start) - 1.0))
            _wait_keys(store, [f"{spec['token']}/done/{i}" for i in range(len(keys))], left)
    except Exception:  # noqa: S110 - a host that vanished at the end changes no figure
        pass
    emit({"event": "done", "ok": ok, "wall_s": round(time.monotonic() - start, 3)})
    return 0 if ok else EXIT_FAILED


def main(spec_text: str) -> int:
    try:
        spec = json.loads(spec_text)
        for k in ("token", "hosts", "master", "port", "deadline", "rdzv_timeout", "sizes"):
            spec[k]  # noqa: B018 - a KeyError here is a bad spec
    except (ValueError, KeyError, TypeError) as e:
        print(f"gputui: bad world-worker spec: {one_line(str(e), 200)}", file=sys.stderr)
        return 2
    try:
        return host_main(spec)
    except Exception as e:
        emit({"event": "error", "stage": "host", "why": one_line(f"{type(e).__name__}: {e}")})
        return EXIT_FAILED
