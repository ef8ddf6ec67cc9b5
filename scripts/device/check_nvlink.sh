#!/usr/bin/env bash
# Issues 31 (item 1) and 35 (item 2) on an NVLink node (4 or 8 GPUs): the NVLink error counters
# read off the sampling path, a pass a minute, and judged as rates against the node's baseline.
#   1. one GPU's read through gputui.collect.nvml.nvlink (18 links x 4 counters): wall and CPU, and
#      what was n/a (PASS when every GPU with links reads its counters);
#   2. `gputui check --json` for 150 s at rest (a pass a minute, so two rates a GPU), its
#      CPU from /proc against the same check with a pass of an hour (one GPU read in the
#      run): PASS when the difference is under 2 % of a core; its first line against the
#      other's (PASS when no later than +0.2 s);
#   3. `gputui record` beside it, replayed with `snapshot --replay --json`: the per-GPU rates
#      and the node's baseline (expected: 270-410 errors a minute a GPU, no link named; PASS
#      when no link is named on an idle, healthy node).
# Run through run_all.sh (it sets PYTHONPATH, OUT):  LIMIT=230 bash scripts/device/run_all.sh nv check_nvlink
# PASS/FAIL/INFO lines in $OUT/nvlink_summary.txt. About 3 minutes.
set -u
O="${OUT:?}"
S="$O/nvlink_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
say "INFO $(nvidia-smi -L | wc -l) GPU(s): $(nvidia-smi -L | head -1)"

python3 - <<'PY' 2>&1 | tee -a "$S"
import time
from gputui.collect.nvml.nvlink import NvLinkReader
from gputui.collect.nvml.reader import NvmlReader
r = NvmlReader()
rd = NvLinkReader(r._nv, r.devices, timeout=10)
for d in r.devices:
    w0 = time.perf_counter()
    row = rd._nvml.run(rd._read_gpu, d, timeout=10, what="one GPU")
    w1 = time.perf_counter()
    links = [x for x in (row or {}).get("links", []) if x is not None]
    print(f"INFO GPU {d.index}: {len(links)} links up, {rd.reads} reads so far, "
          f"{(w1 - w0) * 1e3:.1f} ms wall; na {(row or {}).get('na')}")
ok = rd.reads > 0
print(f"{'PASS' if ok else 'FAIL'} NVLink counters read ({rd.reads} reads in {len(r.devices)} GPU reads)")
rd.close()
r.close()
PY

SPAN=${NVLINK_SPAN_S:-150}  # seconds of each check (75 with NVLINK_PASS_S=25: 3 passes)
PASS=${NVLINK_PASS_S:-60}
cpu_of() {  # utime+stime ticks of a pid, from /proc
  awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}
run_check() {  # $1: name; $2: the pass in seconds (3600: one GPU read in the whole run)
  GPUTUI_NVLINK_PASS_S=$2 python3 - "$O/check_$1.jsonl" <<'PY' &
import subprocess, sys, time
t0 = time.monotonic()
import os
argv = [sys.executable, "-m", "gputui", "check", "--json", "--duration", os.environ["SPAN"], "--interval", "1"]
with open(sys.argv[1], "w") as f:
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    print(f"PID {p.pid}", file=sys.stderr, flush=True)
    for i, line in enumerate(p.stdout):
        if i == 0:
            print(f"FIRST {time.monotonic() - t0:.3f}", file=sys.stderr, flush=True)
        f.write(line)
    p.wait()
PY
}
export SPAN
run_check on "$PASS" 2>"$O/check_on.err"
ON=$!
run_check off 3600 2>"$O/check_off.err"
OFF=$!
GPUTUI_NVLINK_PASS_S=$PASS timeout $((SPAN + 20)) python3 -m gputui record "$O/nvlink.jsonl.gz" \
  --duration "$SPAN" --interval 1 >"$O/record.out" 2>&1 &
REC=$!
sleep $((SPAN - 10))
pid_of() { sed -n 's/^PID //p' "$O/check_$1.err" | head -1; }
on_cpu=$(cpu_of "$(pid_of on)") off_cpu=$(cpu_of "$(pid_of off)")
wait $ON $OFF $REC
say "INFO check CPU over $((SPAN - 10)) s (a pass every $PASS s): with counters ${on_cpu} ticks, without ${off_cpu} ticks"
python3 - "$on_cpu" "$off_cpu" "$O" "$((SPAN - 10))" <<'PY' | tee -a "$S"
import re, sys
on, off, o, span = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
share = (on - off) / 100 / span
print(f"{'PASS' if share < 0.02 else 'FAIL'} the counters cost {share:.2%} of a core")
first = {}
for k in ("on", "off"):
    m = re.search(r"FIRST ([\d.]+)", open(f"{o}/check_{k}.err").read())
    first[k] = float(m[1]) if m else None
ok = None not in first.values() and first["on"] <= first["off"] + 0.2
print(f"{'PASS' if ok else 'FAIL'} first check line {first['on']} s with counters, "
      f"{first['off']} s without")
PY
python3 -m gputui snapshot --replay "$O/nvlink.jsonl.gz" --json >"$O/nvlink_snapshot.json" 2>&1
python3 - "$O/nvlink_snapshot.json" <<'PY' | tee -a "$S"
import json, sys
h = json.load(open(sys.argv[1]))["health"]
print("INFO node:", json.dumps(h.get("nvlink")))
for g, row in sorted(h["gpus"].items(), key=lambda x: int(x[0])):
    nv = row.get("nvlink") or {}
    print(f"INFO GPU {g}: since boot {nv.get('errors_since_boot')}, per min {nv.get('per_min')}, "
          f"worst link {nv.get('worst_link_per_min')}, na {nv.get('na')}")
rated = [g for g, row in h["gpus"].items() if (row.get("nvlink") or {}).get("per_min")]
print(f"{'PASS' if rated else 'FAIL'} rates for GPU(s) {sorted(rated)}")
print(f"{'PASS' if not h['findings'] else 'FAIL'} no link named at rest: {h['findings']}")
PY
