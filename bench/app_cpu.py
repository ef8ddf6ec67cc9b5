"""Figures 2 and 3: CPU and peak RSS of the running app, and time to the first frame that
shows the GPU panels, gputui against nvitop, each in a terminal of the same fixed size.

Each app runs in its own terminal: a detached tmux session (`--runner tmux`, polled with
`tmux capture-pane -p` every --poll s) or, where tmux is absent, a pseudo-terminal this
script opens itself (`--runner pty`: the app's output is read as it comes, escape sequences
are dropped, and the marker is searched in the text; resolution is the time of the read
that completed the marker, well under 1 ms). `auto` takes tmux when it is installed.

- first frame: from just before the app is started to the first screen (tmux) or output
  (pty) that shows a power figure (`122/700W` for gputui and the floor, `80W / 700W` for
  nvitop; "No GPUs" for gputui on a machine without one). Python's start-up is included.
- `--source`: what gputui shows: `live` NVML (host processes without a GPU), the `demo`
  replay (4 samples/s), or `busy`: a 1 sample/s replay of the recording's training phase
  whose process figures change every second (bench/busy_trace.py), the case a person
  watching a running job lives in.
- `floor` (bench/floor_app.py): a bare Textual app that repaints one line a second. Its
  figures, in the same run, are what Textual itself costs.
- `--no-pyc`: the apps' installed packages are compiled from source at each start, as after
  `pip install --no-compile` on an image with PYTHONDONTWRITEBYTECODE=1: every non-stdlib
  module the apps import (gputui, textual, rich, psutil, nvidia-ml-py ... and nvitop) is copied
  without its __pycache__ into a temporary directory that goes first on PYTHONPATH, and
  PYTHONDONTWRITEBYTECODE=1 keeps it that way; the standard library keeps its .pyc, as a
  system Python has them. Nothing installed is touched.
- CPU: user + system seconds of the app's process (and its children) over --duration s,
  after --warmup s, as a percentage of one core; the start-up CPU is reported apart.
- memory: the app's peak RSS (VmHWM from /proc/PID/status: the high-water mark, not a sample).

All apps given run at the same time (`--together`, the default: the same 60 s for both, on a
GPU node with cores to spare) or one after the other (`--one-by-one`).

    python bench/app_cpu.py --duration 60 --apps gputui nvitop floor    # GPU node, live
    python bench/app_cpu.py --source busy --apps gputui floor --duration 60  # CPU box
    python bench/app_cpu.py --apps gputui --duration 20                  # CPU box: host mode
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from busy_trace import busy_lines
from common import fmt, gpu_names, machine, machine_line, median, table, write_json
from terminals import TmuxRunner, exited, make_runner, peak_rss_mb, pick_runner, proc_cpu, tail


@dataclass
class AppSpec:
    name: str
    argv: list[str]
    markers: tuple[str, ...]


@dataclass
class Run:
    spec: AppSpec
    runner: Any
    t0: float = 0.0
    first_frame_s: float | None = None
    pid: int | None = None
    error: str | None = None
    cpu_at_frame: float | None = None
    cpu: list[tuple[float, float]] = field(default_factory=list)  # (wall, cpu seconds)
    rss_samples: list[float] = field(default_factory=list)


# ---------------------------------------------------------------- measuring


POWER = r"re:\d+/\d+ ?W"  # gputui's and the floor's power/limit figure, e.g. 122/700W
NVITOP_POWER = r"re:\d+W / \d+W"  # nvitop's, e.g. 80W / 700W


def source_only_tree(dest: Path, modules: list[str]) -> str:
    """Copies, without any __pycache__, of every non-stdlib package these modules import
    (in a child Python, so this process's imports do not count)."""
    import json
    import shutil
    import subprocess

    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}:\n"
        "    try: importlib.import_module(m)\n"
        "    except Exception: pass\n"
        "std = set(sys.stdlib_module_names)\n"
        "out = {}\n"
        "for name, mod in list(sys.modules.items()):\n"
        "    top = name.split('.')[0]\n"
        "    f = getattr(mod, '__file__', None)\n"
        "    if top in std or not f or name != top: continue\n"
        "    out[top] = f\n"
        "print(json.dumps(out))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    dest.mkdir(parents=True)
    for top, f in json.loads(r.stdout).items():
        src = Path(f)
        if src.name == "__init__.py":
            shutil.copytree(src.parent, dest / top, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.suffix == ".py":
            shutil.copy2(src, dest / src.name)
        # extension modules (.so) have no .pyc; their packages were copied above
    return str(dest)


def app_specs(
    apps: list[str],
    source: str,
    interval: float,
    nvitop: str | None,
    gputui: str | None,
    busy_file: str | None = None,
    no_pyc: str | None = None,
) -> tuple[list[AppSpec], list[str]]:
    """The apps to start, each with the markers of its first frame with data.

    `no_pyc`: a directory of source-only copies of the apps' packages (source_only_tree); every
    app then runs with it first on PYTHONPATH and PYTHONDONTWRITEBYTECODE=1.
    """
    specs, skipped = [], []
    # The test suite's stand-in NVML (tests/nvml_standin; LD_LIBRARY_PATH and
    # GPUTUI_STANDIN_NVML set for the bench) shows GPUs on a CPU box: time its start-up path.
    have_gpu = bool(gpu_names()) or bool(os.environ.get("GPUTUI_STANDIN_NVML"))
    pre = (
        ["env", "-C", no_pyc, "PYTHONDONTWRITEBYTECODE=1", f"PYTHONPATH={no_pyc}"] if no_pyc else []
    )
    for name in apps:
        name, _, cmd = name.partition("=")  # NAME=COMMAND: another build, e.g. an older gputui
        if name.startswith("gputui"):
            argv = shlex.split(cmd or gputui or "") or [sys.executable, "-m", "gputui"]
            if interval > 0:  # 0: each app at its own default (gputui 1 s, nvitop 2 s)
                argv += ["--interval", f"{interval:g}"]
            markers: tuple[str, ...] = (POWER,)
            if source == "demo":
                argv.append("--demo")
            elif source == "busy":
                argv += ["--replay", str(busy_file)]
            elif not have_gpu:
                markers = ("No GPUs",)  # host mode: its first frame has the explanation
            specs.append(AppSpec(name, pre + argv, markers))
        elif name == "floor":
            floor = str(Path(__file__).resolve().parent / "floor_app.py")
            specs.append(AppSpec("floor", pre + [sys.executable, floor], (POWER,)))
        elif name == "nvitop":
            exe = nvitop or shutil.which("nvitop")
            if exe is None:
                skipped.append("nvitop: not installed (pip install nvitop)")
            elif not have_gpu:
                skipped.append("nvitop: no NVIDIA GPU here, it shows nothing without one")
            else:
                argv = [*shlex.split(exe), "--monitor", "full"]
                argv += ["--interval", f"{interval:g}"] if interval > 0 else []
                specs.append(AppSpec("nvitop", pre + argv, (NVITOP_POWER,)))
        else:
            raise SystemExit(f"unknown app {name!r} (gputui, nvitop, floor)")
    return specs, skipped


def measure(
    specs: list[AppSpec],
    runner: str,
    cols: int,
    rows: int,
    duration: float,
    warmup: float,
    poll: float,
    frame_timeout: float,
) -> list[Run]:
    # pid and a random part: a run in a PID namespace of its own (bench/node_cost.py) has a
    # small pid that another such run may have too, and the tmux socket's directory is shared
    socket = f"gputui-bench-{os.getpid()}-{os.urandom(3).hex()}"
    runs: list[Run] = []
    try:
        for s in specs:
            r = make_runner(runner, s.name, s.argv, cols, rows, socket)
            run = Run(s, r)
            runs.append(run)
            run.t0 = time.perf_counter()
            r.start()
            run.pid = r.pid()
        # first frames
        deadline = time.perf_counter() + frame_timeout
        waiting = list(runs)
        while waiting and time.perf_counter() < deadline:
            for run in list(waiting):
                at = run.runner.found(run.spec.markers)
                if at is not None:
                    run.first_frame_s = at - run.t0
                    run.cpu_at_frame = proc_cpu(run.pid) if run.pid else None
                    waiting.remove(run)
                elif run.pid is None or not psutil.pid_exists(run.pid) or exited(run.pid):
                    run.error = "exited before its first frame: " + tail(run.runner.screen())
                    waiting.remove(run)
            time.sleep(poll)
        for run in waiting:
            screen = run.runner.screen()
            run.error = f"no first frame within {frame_timeout:g} s: " + tail(screen)
            # the whole screen, so a marker that does not match can be seen and fixed
            print(f"--- {run.spec.name} screen, markers {run.spec.markers} not all found:")
            print(screen)
        live = [r for r in runs if r.error is None and r.pid]
        # steady state
        time.sleep(warmup)
        t_end = time.perf_counter() + duration
        for run in live:
            c = proc_cpu(run.pid)  # type: ignore[arg-type]
            if c is not None:
                run.cpu.append((time.perf_counter(), c))
        while time.perf_counter() < t_end:
            time.sleep(min(1.0, max(0.0, t_end - time.perf_counter())))
            for run in live:
                with contextlib.suppress(psutil.Error):
                    rss = psutil.Process(run.pid).memory_info().rss / 2**20
                    run.rss_samples.append(rss)
        for run in live:
            c = proc_cpu(run.pid)  # type: ignore[arg-type]
            if c is None or exited(run.pid):  # type: ignore[arg-type]
                run.error = "exited during the measurement: " + tail(run.runner.screen())
                continue
            run.cpu.append((time.perf_counter(), c))
            run.rss_samples.append(peak_rss_mb(run.pid) or 0.0)  # type: ignore[arg-type]
    finally:
        for run in runs:
            with contextlib.suppress(Exception):
                run.runner.stop()
        if runner == "tmux":
            TmuxRunner.shutdown(socket)
    return runs


def summarize(runs: list[Run]) -> list[dict[str, Any]]:
    out = []
    for run in runs:
        d: dict[str, Any] = {
            "app": run.spec.name,
            "argv": shlex.join(run.spec.argv),
            "markers": list(run.spec.markers),
            "runner": run.runner.kind,
            "first_frame_s": run.first_frame_s,
            "startup_cpu_s": run.cpu_at_frame,
            "error": run.error,
        }
        if len(run.cpu) == 2 and run.error is None:
            (w0, c0), (w1, c1) = run.cpu
            d["window_s"] = w1 - w0
            d["cpu_s"] = c1 - c0
            d["cpu_percent"] = 100 * (c1 - c0) / (w1 - w0)
            d["total_cpu_s"] = c1
            d["peak_rss_mb"] = run.rss_samples[-1]
            d["max_sampled_rss_mb"] = max(run.rss_samples)
        out.append(d)
    return out


def run(
    apps: list[str] | None = None,
    source: str = "live",
    duration: float = 60.0,
    warmup: float = 3.0,
    interval: float = 1.0,
    size: str = "160x50",
    runner: str = "auto",
    together: bool = True,
    poll: float = 0.02,
    frame_timeout: float = 30.0,
    nvitop: str | None = None,
    gputui: str | None = None,
    frames: int = 0,
    no_pyc: bool = False,
) -> dict[str, Any]:
    """The CPU/RSS run (skipped with duration 0), then `frames` first-frame starts of each app,
    one app at a time (alternating which goes first), so start-ups never compete."""
    cols, rows = (int(x) for x in size.lower().split("x"))
    kind = pick_runner(runner)
    with tempfile.TemporaryDirectory(prefix="gputui-bench-") as tmp:
        busy = str(Path(tmp) / "busy.jsonl")
        if source == "busy":
            Path(busy).write_text("\n".join(busy_lines(int(duration + 60))) + "\n")
        empty = (
            source_only_tree(Path(tmp) / "src", ["gputui.ui.app", "gputui.cli", "nvitop"])
            if no_pyc
            else None
        )
        specs, skipped = app_specs(
            apps or ["gputui", "nvitop"], source, interval, nvitop, gputui, busy, empty
        )
        return _run(
            specs,
            skipped,
            kind,
            cols,
            rows,
            duration,
            warmup,
            interval,
            together,
            poll,
            frame_timeout,
            frames,
            source,
            no_pyc,
        )


def _run(
    specs: list[AppSpec],
    skipped: list[str],
    kind: str,
    cols: int,
    rows: int,
    duration: float,
    warmup: float,
    interval: float,
    together: bool,
    poll: float,
    frame_timeout: float,
    frames: int,
    source: str,
    no_pyc: bool,
) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    groups = [specs] if together else [[s] for s in specs]
    for group in groups if duration > 0 else []:
        if group:
            runs = measure(group, kind, cols, rows, duration, warmup, poll, frame_timeout)
            results.extend(summarize(runs))
    starts: dict[str, list[float]] = {s.name: [] for s in specs}
    start_errors: list[str] = []
    for i in range(frames):
        for s in specs[i % len(specs) :] + specs[: i % len(specs)] if specs else []:
            (r,) = measure([s], kind, cols, rows, 0.0, 0.0, poll, frame_timeout)
            if r.first_frame_s is not None:
                starts[s.name].append(r.first_frame_s)
            else:
                start_errors.append(f"{s.name}: {r.error}")
    res: dict[str, Any] = {
        "runner": kind,
        "poll_s": poll if kind == "tmux" else None,
        "resolution": f"{poll * 1e3:.0f} ms (capture-pane poll)"
        if kind == "tmux"
        else "<1 ms (read on the pty; checked every poll)",
        "size": f"{cols}x{rows}",
        "duration_s": duration,
        "warmup_s": warmup,
        "interval_s": interval,
        "source": source,
        "pyc": not no_pyc,
        "together": together and len(specs) > 1,
        "apps": results,
        "skipped": skipped,
        "first_frames_s": starts if frames else {},
        "first_frame_median_s": {k: median(v) for k, v in starts.items() if v},
        "first_frame_errors": start_errors,
    }
    fm = res["first_frame_median_s"]
    if fm.get("gputui") and fm.get("nvitop"):
        res["first_frame_median_ratio_gputui_over_nvitop"] = fm["gputui"] / fm["nvitop"]
    by = {a["app"]: a for a in results}
    g, n, fl = by.get("gputui"), by.get("nvitop"), by.get("floor")
    if g and fl and g.get("cpu_percent") is not None and fl.get("cpu_percent"):
        res["cpu_ratio_gputui_over_floor"] = g["cpu_percent"] / fl["cpu_percent"]
        res["rss_ratio_gputui_over_floor"] = g["peak_rss_mb"] / fl["peak_rss_mb"]
    if g and n and g.get("cpu_percent") is not None and n.get("cpu_percent"):
        res["cpu_ratio_gputui_over_nvitop"] = g["cpu_percent"] / n["cpu_percent"]
        res["rss_ratio_gputui_over_nvitop"] = g["peak_rss_mb"] / n["peak_rss_mb"]
    if g and n and g.get("first_frame_s") and n.get("first_frame_s"):
        res["first_frame_ratio_gputui_over_nvitop"] = g["first_frame_s"] / n["first_frame_s"]
    return res


def report(res: dict[str, Any]) -> str:
    rows = [
        (
            a["app"],
            a.get("first_frame_s"),
            a.get("startup_cpu_s"),
            a.get("cpu_percent"),
            a.get("peak_rss_mb"),
            a.get("error") or "",
        )
        for a in res["apps"]
    ]
    head = ("app", "first frame s", "start-up CPU s", "CPU % of a core", "peak RSS MiB", "")
    how = "together" if res["together"] else "one after the other"
    lines = [
        f"gputui source: {res['source']}, .pyc {'present' if res['pyc'] else 'absent'}; "
        f"{res['size']} terminal ({res['runner']}, first-frame resolution {res['resolution']}), "
        f"refresh {res['interval_s'] or 'each default'} s, CPU over {res['duration_s']:g} s after "
        f"{res['warmup_s']:g} s warm-up, apps run {how}",
        table(rows, head),
    ]
    for k in (
        "cpu_ratio_gputui_over_nvitop",
        "rss_ratio_gputui_over_nvitop",
        "cpu_ratio_gputui_over_floor",
        "rss_ratio_gputui_over_floor",
    ):
        if k in res:
            lines.append(f"{k}: {res[k]:.2f}")
    if "first_frame_ratio_gputui_over_nvitop" in res:
        lines.append(
            "first_frame_ratio_gputui_over_nvitop: "
            f"{res['first_frame_ratio_gputui_over_nvitop']:.2f}"
        )
    for app, xs in res["first_frames_s"].items():
        runs = ", ".join(f"{x:.3f}" for x in xs)
        med = res["first_frame_median_s"].get(app)
        lines.append(f"first frame, {app} alone: median {fmt(med, 3)} s ({runs})")
    if "first_frame_median_ratio_gputui_over_nvitop" in res:
        r = res["first_frame_median_ratio_gputui_over_nvitop"]
        lines.append(f"first_frame_median_ratio_gputui_over_nvitop: {r:.2f}")
    lines.extend(f"first frame failed: {e}" for e in res["first_frame_errors"])
    lines.extend(f"skipped {s}" for s in res["skipped"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--apps",
        nargs="+",
        default=["gputui", "nvitop"],
        help="gputui, nvitop, floor, or gputui-NAME=COMMAND for another gputui build",
    )
    ap.add_argument(
        "--source", choices=("live", "demo", "busy"), default="live", help="what gputui shows"
    )
    ap.add_argument("--no-pyc", action="store_true", help="no .pyc read or written by any app")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument(
        "--interval", type=float, default=1.0, help="refresh of both apps (s); 0: their defaults"
    )
    ap.add_argument("--size", default="160x50", help="terminal COLSxROWS (default 160x50)")
    ap.add_argument("--runner", choices=("auto", "tmux", "pty"), default="auto")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--together", dest="together", action="store_true", default=True)
    g.add_argument("--one-by-one", dest="together", action="store_false")
    ap.add_argument("--poll", type=float, default=0.02, help="screen poll period (s)")
    ap.add_argument("--frame-timeout", type=float, default=30.0)
    ap.add_argument("--nvitop", help="nvitop command (default: nvitop on PATH)")
    ap.add_argument("--gputui", help="gputui command (default: python -m gputui)")
    ap.add_argument(
        "--frames", type=int, default=0, help="then start each app N times alone for first frame"
    )
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    print(machine_line(machine()), file=sys.stderr)
    res = run(
        args.apps,
        args.source,
        args.duration,
        args.warmup,
        args.interval,
        args.size,
        args.runner,
        args.together,
        args.poll,
        args.frame_timeout,
        args.nvitop,
        args.gputui,
        args.frames,
        args.no_pyc,
    )
    print(report(res))
    write_json(args.json, "app_cpu", res)
    ok = all(a.get("error") is None for a in res["apps"]) and not res["first_frame_errors"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
