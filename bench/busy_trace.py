"""A busy recording to replay: what a person watching a running job sees, at 1 sample/s.

The GPU readings are the real training phase of the bundled 2 x H200 recording (util ~98%,
power ~690 W), taken one sample a second and looped; the two ranks' host figures change
every sample as a running job's do (CPU% and RSS move; elapsed time grows), so the process
table has something to redraw each second. Used by bench/app_cpu.py `--source busy`.

    python bench/busy_trace.py OUT.jsonl [--seconds 120]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

from common import ROOT  # noqa: F401 - puts the checkout on sys.path

from gputui.collect.source import demo_path


def busy_lines(seconds: int, seed: int = 12) -> list[str]:
    rng = random.Random(seed)
    with gzip.open(demo_path(), "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    train = [r for r in rows if r.get("phase") == "train" and "type" not in r]  # samples only
    by_t: dict[float, list[dict]] = {}
    for r in train:
        by_t.setdefault(r["t"], []).append(r)
    samples = [by_t[t] for t in sorted(by_t)][::4]  # ~1 per second of the 4 Hz recording
    out, t0 = [], 1_800_000_000.0
    for i in range(seconds):
        for r in samples[i % len(samples)]:
            d = {**r, "t": t0 + i}
            d.pop("phase", None)
            procs = []
            for p in d.get("procs") or ():
                p = dict(p)
                p["cpu"] = round(rng.uniform(95, 101), 1)
                p["rss_mb"] = round(5800 + rng.uniform(-40, 40), 1)
                p["state"] = rng.choice(("running", "running", "sleeping"))
                p["create_time"] = t0 - 300
                procs.append(p)
            d["procs"] = procs
            out.append(json.dumps(d, separators=(",", ":")))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--seconds", type=int, default=120)
    a = ap.parse_args(argv)
    Path(a.out).write_text("\n".join(busy_lines(a.seconds)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
