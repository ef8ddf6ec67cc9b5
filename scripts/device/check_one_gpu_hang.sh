#!/usr/bin/env bash
# Issues 9, 10 and 13 on a machine with ONE GPU: a real 2-rank NCCL job whose two ranks share
# GPU 0 (scripts/device/multi_worker.py --share-gpu: each rank gets its own NCCL_HOSTID, so NCCL takes
# them for two nodes and connects them over sockets on loopback). Three modes:
#   stuck     rank 1 sleeps in load_next_batch_stuck(), rank 0 waits in all_reduce/synchronize
#   exit      rank 1 raises in load_next_batch_crashes() and exits; rank 0 waits for it
#   mismatch  rank 1 calls broadcast while rank 0 calls all_reduce
# For each: `gputui check --json` from before the onset (auto-dump on, RAS and the flight
# recorder gathered at the stall), each line stamped with its arrival time, the dashboard's
# frame at 80x24 (headless, at the same time: two gputui dump the same ranks), the exporter's
# /metrics ~18 s after the onset and the raw RAS answers; for `stuck` also a recording and
# `gputui dump --job`. Run through run_all.sh (it sets PYTHONPATH, OUT, the NCCL env):
#   LIMIT=330 bash scripts/device/run_all.sh og check_one_gpu_hang
#   MODES=exit LIMIT=120 bash scripts/device/run_all.sh og check_one_gpu_hang     # one mode
# PASS/FAIL lines in $OUT/onegpu_summary.txt. About 4 minutes.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/gputui_frpipe_
export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/gputui_frdump_
O="${OUT:?}"
S="$O/onegpu_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
. scripts/device/common.sh
JOB= BG=() EXP=
stop_all() {
  [ -n "$EXP" ] && kill -TERM "$EXP" 2>/dev/null
  EXP=
  for p in "${BG[@]}"; do kill -TERM "$p" 2>/dev/null; done
  BG=()
  stop_group "$JOB"
  JOB=
}
trap stop_all EXIT
trap 'stop_all; exit 143' TERM INT

say "INFO $(nvidia-smi -L | head -1)"
say "INFO $(python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' 2>&1)"



metrics() {  # the exporter's answer now; PASS when a suspect series is there
  python3 - "$O" "$1" <<'PY' | tee -a "$S"
import sys, urllib.request
out, mode = sys.argv[1:3]
try:
    text = urllib.request.urlopen("http://127.0.0.1:9835/metrics", timeout=5).read().decode()
except OSError as e:
    print(f"FAIL exporter ({mode}): {e}"); sys.exit()
open(f"{out}/og_{mode}_metrics.txt", "w").write(text)
keep = [x for x in text.splitlines() if x.startswith(("gputui_job_", "gputui_gpu_state{"))]
print("\n".join(x for x in keep if not x.endswith(" 0.0")))
ok = any(x.startswith("gputui_job_suspect{") and x.endswith(" 1.0") for x in keep)
print(f"{'PASS' if ok else 'FAIL'} exporter ({mode}): gputui_job_suspect at onset + ~18 s")
PY
}

# MODES=exit bash ... runs only that one
for mode in $(echo "${MODES:-stuck,exit,mismatch}" | tr , ' '); do
  dur=35
  [ "$mode" = stuck ] && dur=45
  rm -f /tmp/gputui_frpipe_* /tmp/gputui_frdump_*
  log="$O/og_${mode}_job.txt"
  setsid python3 scripts/device/multi_worker.py --spawn 2 "$mode" 150 --odd 1 --onset 8 --share-gpu \
    --size 4194304 \
    >"$log" 2>&1 &
  JOB=$!
  for _ in $(seq 1 180); do  # at most 90 s for both ranks
    [ "$(grep -c '^READY rank=' "$log")" -ge 2 ] && break
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.5
  done
  if [ "$(grep -c '^READY rank=' "$log")" -lt 2 ]; then
    say "FAIL $mode: the job did not start"
    tail -25 "$log" | tee -a "$S"
    stop_all
    continue
  fi
  grep '^READY rank=' "$log" | tee -a "$S"
  python3 -m gputui exporter --listen 127.0.0.1:9835 --interval 1 >"$O/og_exporter.txt" 2>&1 &
  EXP=$!  # runs until killed: never waited for
  timeout 60 python3 scripts/device/app_frame.py "$O/og_${mode}_app.svg" 34 80x24 >"$O/og_${mode}_app.txt" 2>&1 &
  BG+=($!)
  if [ "$mode" = stuck ]; then
    timeout 60 python3 -m gputui record --force "$O/og_stuck.trace.jsonl.gz" --duration 40 \
      --interval 0.5 >/dev/null 2>"$O/og_record.err" &
    BG+=($!)
  fi
  (timeout $((dur + 60)) python3 -m gputui check --json --duration "$dur" --interval 0.5 \
    2>"$O/og_${mode}.err"; echo "{\"_exit\": $?}") | stamp >"$O/og_${mode}.jsonl" &
  CHK=$!
  if [ "$mode" != stuck ]; then  # the raw RAS answers of the exit and mismatch hangs too
    for _ in $(seq 1 60); do grep -q '^ONSET' "$log" && break; sleep 0.5; done
    sleep 8
    ras_raw "$O" "onegpu-$mode" | tee -a "$S"
    sleep 8
    metrics "$mode"
    kill -TERM "$EXP" 2>/dev/null
    EXP=
  fi
  if [ "$mode" = stuck ]; then
    for _ in $(seq 1 60); do grep -q '^ONSET' "$log" && break; sleep 0.5; done
    sleep 6
    ras_raw "$O" onegpu-a | tee -a "$S"
    sleep 4
    ras_raw "$O" onegpu-b | tee -a "$S"
    sleep 8
    metrics stuck
    kill -TERM "$EXP" 2>/dev/null
    EXP=
    t0=$(date +%s.%N)  # every rank dumped at once, identical stacks grouped
    timeout 30 python3 -m gputui dump --job "$(grep -m1 -o 'READY rank=0 pid=[0-9]*' "$log" | cut -d= -f3)" \
      >"$O/og_dump_job.txt" 2>&1
    say "INFO dump --job: exit $? in $(awk "BEGIN{print $(date +%s.%N) - $t0}") s"
    head -12 "$O/og_dump_job.txt" | tee -a "$S"
  fi
  wait "$CHK"
  for p in "${BG[@]}"; do wait "$p" 2>/dev/null; done
  BG=()
  python3 - "$O/og_${mode}.jsonl" "$log" "$mode" <<'PY' | tee -a "$S"
import json, re, sys
path, log, mode = sys.argv[1:4]
lines = [json.loads(x) for x in open(path) if x.strip()]
rc = next((d["_exit"] for d in lines if "_exit" in d), None)
lines = [d for d in lines if "_exit" not in d]
m = re.search(r"^ONSET rank=\d+ pid=\d+ step=\d+ t=([\d.]+)", open(log).read(), re.M)
onset = float(m.group(1)) if m else None
def rel(t):
    return f"{t - onset:+6.1f}s" if onset else "   ?  "
for d in lines:
    print(f"  {rel(d['_arrived'])} (sample {rel(d['t'])}) {d['state']:8s} suspects={d['suspects']} "
          f"culprit_frame={d.get('culprit_frame')}")
    for f in (d.get("findings") or [])[:8]:
        print(f"      finding: {f[:220]}")
    for s in d.get("stacks") or []:
        print(f"      stack: rank={s.get('rank')} pid={s.get('pid')} role={s.get('role')} "
              f"outcome={s.get('outcome')} frame={s.get('frame')} collective={s.get('collective')}")
found = [str(f) for d in lines for f in (d.get("findings") or [])]
if mode == "stuck":
    hit = next((d for d in lines if "load_next_batch_stuck" in str(d.get("culprit_frame"))), None)
    ok = hit is not None
    how = f"culprit_frame at {rel(hit['_arrived'])} after the onset" if hit else "no culprit_frame"
    how += "; RAS " + ("named" if any("RAS" in f or "behind" in f for f in found) else "silent")
    how += "; flight recorder " + ("named" if any("flight" in f.lower() for f in found) else "silent")
elif mode == "exit":
    ok = any("gone" in f for f in found)
    how = "a finding says gone" if ok else "no 'gone' finding"
else:
    ok = any("different collectives" in f for f in found)
    how = "'different collectives' found" if ok else "no 'different collectives' finding"
print(f"{'PASS' if ok else 'FAIL'} {mode}: check exit {rc}; {how}")
PY
  head -5 "$O/og_${mode}.err" | tee -a "$S"
  grep -E '^(ONSET|ERROR|IN) ' "$log" | head -6 | tee -a "$S"
  nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,power.draw,power.limit \
    --format=csv,noheader | tee -a "$S"
  head -16 "$O/og_${mode}_app.txt" | tee -a "$S"
  grep -m3 -E "^(banner|findings):" "$O/og_${mode}_app.txt" | cut -c1-400 | tee -a "$S"
  if [ "$mode" = stuck ]; then
    python3 -m gputui check --replay "$O/og_stuck.trace.jsonl.gz" --json 2>&1 | tail -1 \
      | cut -c1-600 | tee -a "$S"
  fi
  stop_all
done
