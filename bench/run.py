"""Run the gputui benchmarks and print one summary table against the targets of issue 6.

`--quick` is the CPU-only subset (no GPU needed; under a minute on 2 cores): fewer ticks,
repeats and seconds than the figures in BENCHMARKS.md, so it is a smoke run that shows the
order of magnitude, not the published figures. Without `--quick` each figure runs with the
settings BENCHMARKS.md quotes (several minutes); `--nvml` adds the real-GPU sampler figures,
and nvitop is compared wherever it is installed and a GPU is present.

    python bench/run.py --quick
    python bench/run.py --json-dir out/bench          # full, one JSON file per figure
    python bench/run.py --only sampler table
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import app_cpu
import dump_all
import sampler_cost
import table_apply
from common import fmt, machine, machine_line, table, write_json

FIGURES = ("sampler", "table", "app", "dump")

QUICK: dict[str, dict[str, Any]] = {
    "sampler": {"procs": [0, 100, 500, 1000], "ticks": 15, "nvml": False},
    "table": {"rows": 1000, "repeat": 1},
    # the busy replay (1 sample/s, figures changing every second) beside the bare-Textual floor
    "app": {
        "apps": ["gputui", "floor"],
        "source": "busy",
        "duration": 15.0,
        "warmup": 2.0,
        "frames": 1,
    },
    "dump": {"n": 8, "repeat": 1},
}
FULL: dict[str, dict[str, Any]] = {
    "sampler": {"procs": [0, 100, 500, 1000], "ticks": 200, "nvml": False},
    "table": {"rows": 1000, "repeat": 7},
    "app": {"apps": ["gputui", "nvitop", "floor"], "duration": 60.0, "frames": 3},
    "dump": {"n": 8, "repeat": 5},
}
RUNNERS = {
    "sampler": sampler_cost,
    "table": table_apply,
    "app": app_cpu,
    "dump": dump_all,
}


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("met" if ok else "MISSED")


def summary_rows(
    results: dict[str, Any], mach: dict[str, Any] | None = None
) -> list[tuple[str, str, str, str]]:
    """(figure, measured, target, met) rows for the figures that ran."""
    rows: list[tuple[str, str, str, str]] = []
    s = results.get("sampler")
    if s:
        for r in s["procs"]:
            ratio = r["ratio_cpu"]
            rows.append(
                (
                    f"1. sampler tick, {r['procs']} procs",
                    f"{fmt(r['sampler']['cpu_ms_median'])} ms CPU, "
                    f"floor {fmt(r['floor']['cpu_ms_median'])} ms, x{fmt(ratio)}",
                    "<= 1.5 x floor",
                    verdict(None if ratio is None else ratio <= 1.5),
                )
            )
        nv = s.get("nvml") or {}
        for r in nv.get("read", []):
            rows.append(
                (
                    f"1. NVML read, {r['gpus']} GPU",
                    f"{fmt(r['reader_cpu_us_per_gpu'])} us CPU/GPU, x{fmt(r['ratio_cpu'])}",
                    "<= 1.5 x floor",
                    verdict(r["ratio_cpu"] <= 1.5),
                )
            )
        if "tick" in nv:
            t = nv["tick"]
            rows.append(
                (
                    f"1. live tick, {nv['gpus']} GPU",
                    f"{fmt(t['sampler']['cpu_ms_median'])} ms CPU, x{fmt(t['ratio_cpu'])}",
                    "<= 1.5 x floor",
                    verdict(t["ratio_cpu"] <= 1.5),
                )
            )
    a = results.get("app")
    if a:
        for app in a["apps"]:
            rows.append(
                (
                    f"2. {app['app']} at {a['interval_s']:g} s refresh",
                    f"{fmt(app.get('cpu_percent'))} % CPU over {a['duration_s']:g} s, "
                    f"peak RSS {fmt(app.get('peak_rss_mb'))} MiB",
                    "gputui <= 0.5 x nvitop" if app["app"] != "floor" else "the floor",
                    app.get("error") or "",
                )
            )
        if "cpu_ratio_gputui_over_nvitop" in a:
            r = a["cpu_ratio_gputui_over_nvitop"]
            rows.append(("2. CPU gputui / nvitop", f"x{r:.2f}", "<= 0.5", verdict(r <= 0.5)))
        if "cpu_ratio_gputui_over_floor" in a:
            r = a["cpu_ratio_gputui_over_floor"]
            rows.append(
                (
                    f"2. CPU gputui ({a['source']}) / bare Textual floor",
                    f"x{r:.2f}",
                    "what Textual allows: x1",
                    "-",
                )
            )
        for name, med in a["first_frame_median_s"].items():
            on_gpu = bool((mach or machine()).get("gpus")) and a.get("source") == "live"
            rows.append(
                (
                    f"3. first frame, {name}",
                    f"{fmt(med, 3)} s (median of {len(a['first_frames_s'][name])})",
                    "< 1 s on the GPU node",
                    verdict(med < 1.0) if on_gpu and name == "gputui" else "-",
                )
            )
    t = results.get("table")
    if t:
        for c in t["cases"]:
            if c["case"].startswith(("(a)", "(b)", "(c)")):
                rows.append(
                    (
                        f"4. table {c['case']}",
                        f"{fmt(c['apply_ms_median'])} ms apply, "
                        f"{fmt(c['total_ms_median'])} ms with the frame",
                        "< 50 ms",
                        verdict(c["total_ms_median"] < 50),
                    )
                )
        rows.append(
            (
                f"4. table memory, {t['rows']} rows",
                f"{fmt(t['rss_growth_mb'])} MiB RSS growth",
                "",
                "-",
            )
        )
    d = results.get("dump")
    if d:
        if "skipped" in d:
            rows.append(("5. dump all ranks", f"skipped: {d['skipped']}", "", "-"))
        else:
            rows.append(
                (
                    f"5. dump all, {d['procs']} procs",
                    f"{fmt(d.get('gputui_s', float('nan')) * 1e3)} ms vs "
                    f"{fmt(d['sequential_s'] * 1e3)} ms one by one "
                    f"(x{fmt(d.get('speedup_vs_sequential'))})",
                    "faster than one by one",
                    verdict(d.get("speedup_vs_sequential", 0) > 1),
                )
            )
    rows.append(("6. probe", "scripts/device/check_probe.sh (see BENCHMARKS.md)", "", "-"))
    return rows


def run_figure(name: str, kw: dict[str, Any]) -> dict[str, Any]:
    res: dict[str, Any] = RUNNERS[name].run(**kw)
    return res


def summarize_dir(path: str) -> int:
    """The summary table of figures saved earlier (e.g. by scripts/device/check_bench.sh)."""
    results: dict[str, Any] = {}
    for name in FIGURES:
        try:
            with open(f"{path}/{name}.json", encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        results[name] = data["result"]
        m = data["machine"]
    if not results:
        print(f"no figures in {path}", file=sys.stderr)
        return 1
    print(machine_line(m))
    print(table(summary_rows(results, m), ("figure", "measured", "target", "")))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CPU-only smoke subset, < 60 s")
    ap.add_argument("--only", nargs="+", choices=FIGURES, default=list(FIGURES))
    ap.add_argument("--nvml", action="store_true", help="also time real NVML reads (GPU node)")
    ap.add_argument("--json-dir", metavar="DIR", help="write DIR/<figure>.json")
    ap.add_argument("--verbose", action="store_true", help="print each figure's own table")
    ap.add_argument(
        "--from-json", metavar="DIR", help="only print the summary of DIR/<figure>.json files"
    )
    args = ap.parse_args(argv)
    if args.from_json:
        return summarize_dir(args.from_json)
    settings = QUICK if args.quick else FULL
    print(machine_line(machine()))
    results: dict[str, Any] = {}
    t0 = time.perf_counter()
    for name in args.only:
        kw = dict(settings[name])
        if name == "sampler" and args.nvml:
            kw["nvml"] = True
        t = time.perf_counter()
        results[name] = run_figure(name, kw)
        took = time.perf_counter() - t
        print(f"[{name}: {took:.1f} s]", file=sys.stderr)
        if args.verbose:
            print(RUNNERS[name].report(results[name]), end="\n\n")
        if args.json_dir:
            write_json(f"{args.json_dir}/{name}.json", name, results[name])
    print(table(summary_rows(results), ("figure", "measured", "target", "")))
    mode = "quick (smoke settings, not the published figures)" if args.quick else "full"
    print(f"{mode}; {time.perf_counter() - t0:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
