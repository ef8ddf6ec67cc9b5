#!/usr/bin/env bash
# Issue 20 on a machine with ONE GPU: GPU health in the verdict, on a real program fault.
# A 2-rank NCCL job shares GPU 0 (scripts/device/xid_worker.py: NCCL_HOSTID per rank); after 8 s of
# training rank 1's Triton kernel stores far outside its buffer (a real Xid 31, MMU fault;
# the GPU stays usable, nothing is reset or reconfigured) and dies; rank 0 waits for it in
# all_reduce. Beside it, from before the fault:
#   - `gputui check --json` (lines stamped with their arrival): PASS when a line's reason
#     names Xid 31, rank 1 and rank 1's pid within 15 s of the fault;
#   - the dashboard at 80x24 (headless), its screen 60 s in: PASS when it shows the Xid;
#   - the cost: one read of the health counters (wall and CPU), and the CPU per minute of
#     the health monitor (Xid event thread waiting, /dev/kmsg polled each second, counters
#     every 5 s) against the same minute without it.
# Run through run_all.sh (it sets PYTHONPATH, OUT):  bash scripts/device/run_all.sh hl check_health
# PASS/FAIL lines in $OUT/health_summary.txt. About 3 minutes (LIMIT=240 is enough).
set -u
O="${OUT:?}"
S="$O/health_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
. scripts/device/common.sh
JOB= BG=()
stop_all() {
  for p in "${BG[@]}"; do kill -TERM "$p" 2>/dev/null; done
  BG=()
  stop_group "$JOB"
  JOB=
}
trap stop_all EXIT
trap 'stop_all; exit 143' TERM INT

say "INFO $(nvidia-smi -L | head -1)"
say "INFO kernel log: $(head -c0 /dev/kmsg 2>&1 && echo readable || echo 'not readable')"


(timeout 120 python3 -m gputui check --json --stall-after 5 --duration 75 --interval 0.5 \
  2>"$O/health_check.err"; echo "{\"_exit\": $?}") | stamp >"$O/health_check.jsonl" &
CHK=$!
sleep 2  # the check's NVML event set is registered before the job starts
log="$O/health_job.txt"
setsid python3 scripts/device/xid_worker.py --spawn 90 --onset 8 >"$log" 2>&1 &
JOB=$!
timeout 100 python3 scripts/device/app_frame.py "$O/health_app.svg" 60 80x24 >"$O/health_app.txt" 2>&1 &
BG+=($!)
wait "$CHK"
for p in "${BG[@]}"; do wait "$p" 2>/dev/null; done
BG=()
stop_group "$JOB"
JOB=
grep -E '^(READY|LAUNCH|FAULT|ERROR)' "$log" | tee -a "$S"
python3 - "$O/health_check.jsonl" "$log" "$O/health_app.txt" <<'PY' | tee -a "$S"
import json, re, sys
path, log, app = sys.argv[1:4]
lines = [json.loads(x) for x in open(path) if x.strip()]
rc = next((d["_exit"] for d in lines if "_exit" in d), None)
lines = [d for d in lines if "_exit" not in d]
m = re.search(r"^FAULT rank=1 pid=(\d+) t=([\d.]+)", open(log).read(), re.M)
if not m:
    print("FAIL the fault did not happen (see health_job.txt)"); sys.exit()
pid, t = int(m[1]), float(m[2])
print(f"INFO check exit {rc}; {len(lines)} lines")
hit = next((d for d in lines if "Xid 31" in d["reason"] and "rank 1" in d["reason"]), None)
if hit is None:
    print("FAIL no verdict named Xid 31 on rank 1")
    for d in lines[-3:]:
        print("  ", d["state"], d["reason"][:200])
else:
    took = hit["_arrived"] - t
    named = f"pid {pid}" in hit["reason"]
    ok = named and took <= 15
    print(f"{'PASS' if ok else 'FAIL'} verdict at fault + {took:.1f} s: {hit['reason']}")
    if not named:
        print(f"FAIL the verdict does not name rank 1's pid {pid}")
last = lines[-1] if lines else {}
xids = (last.get("health") or {}).get("xids", [])
print("INFO xids:", json.dumps([{k: x.get(k) for k in ("xid", "gpu", "pid", "source")} for x in xids]))
print("INFO notes:", (last.get("health") or {}).get("notes"))
print(f"{'PASS' if any(x.get('xid') == 31 and x.get('pid') == pid for x in xids) else 'FAIL'} "
      "check --json health.xids has Xid 31 with rank 1's pid")
screen = open(app).read()
print(f"{'PASS' if 'Xid 31' in screen else 'FAIL'} dashboard 80x24 shows the Xid")
print("\n".join(l for l in screen.splitlines()[:8]))
PY

python3 - <<'PY' | tee -a "$S"
import time
from gputui.collect.nvml.health import HealthMonitor, read_counters
from gputui.collect.nvml.reader import NvmlReader
r = NvmlReader()
n = 20
w0, c0 = time.perf_counter(), time.process_time()
for _ in range(n):
    r._thread.run(read_counters, r._nv, r.devices, r._thread, timeout=10, what="counters")
w1, c1 = time.perf_counter(), time.process_time()
print(f"INFO one counter read of {len(r.devices)} GPU(s): {(w1 - w0) / n * 1e3:.2f} ms wall, "
      f"{(c1 - c0) / n * 1e3:.2f} ms CPU")
def minute(monitor):
    c0, end = time.process_time(), time.monotonic() + 30
    while time.monotonic() < end:
        if monitor is not None:
            monitor.poll()
        time.sleep(1.0)
    return (time.process_time() - c0) * 2
base = minute(None)
mon = HealthMonitor(r, events=True)
with_mon = minute(mon)
waits = mon._events.waits if mon._events is not None else None
mon.close()
print(f"INFO CPU per minute: {base * 1e3:.1f} ms idle loop, {with_mon * 1e3:.1f} ms with the "
      f"health monitor (Xid waits {waits}, counter reads {mon.counter_reads}): "
      f"{(with_mon - base) * 1e3:.1f} ms/min for health")
r.close()
PY
