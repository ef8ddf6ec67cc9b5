#!/usr/bin/env bash
# Issue 41, items 1-3, on the 4 x H200 node: the cause, not the symptom. One NCCL job per
# case (torchrun, one rank per GPU, scripts/device/cause_threads_worker.py); the last rank is the
# culprit, the others wait in all_reduce + synchronize:
#   gil          its thread `stats` holds the GIL in a regex that never ends
#   poll         it spins in a one-line Python loop polling a flag
#   loader       its DataLoader worker 1 blocks in the dataset's fetch_record()
#   loader-kill  its DataLoader worker 1 is killed with SIGKILL (the rank dies of it)
# For each, `gputui check --json` (stamped) and one summary line: the first line that names
# the cause, its time after the onset (the culprit's READY: its cause starts then), and the
# exit code. About 3 minutes:
#   LIMIT=230 bash scripts/device/run_all.sh cause check_cause_threads
# On the CPU (gloo, 2 ranks, the stand-in libnvidia-ml.so.1 from tests/nvml_standin):
#   GPUTUI_DEVICE_DRYRUN=1 OUT=/tmp/out PYTHON=.venv/bin/python bash scripts/device/check_cause_threads.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/cause_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
. scripts/device/common.sh
PY="${PYTHON:-python3}"
PIDS=()
stop_all() {
  for p in "${PIDS[@]}"; do stop_group "$p"; done
  PIDS=()
}
trap stop_all EXIT
trap 'stop_all; exit 143' TERM INT

if [ "${GPUTUI_DEVICE_DRYRUN:-0}" = 1 ]; then
  NPROC=2
  gcc -shared -fPIC -O1 -o "$O/libnvidia-ml.so.1" tests/nvml_standin/standin.c -lpthread || exit 1
  export LD_LIBRARY_PATH="$O${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export GPUTUI_STANDIN_NVML="spin_gpu:0" PYTHONPATH="$PWD"
  say "INFO dry run: gloo on the CPU, $NPROC ranks, the stand-in NVML (GPU 0 spins)"
else
  NPROC=4
  say "INFO $(nvidia-smi -L | head -1) x $(nvidia-smi -L | wc -l)"
fi

for mode in $(echo "${MODES:-gil,poll,loader,loader-kill}" | tr , ' '); do
  log="$O/cause_$mode.out"
  port=$((29400 + RANDOM % 300))
  setsid "$PY" -m torch.distributed.run --nproc-per-node "$NPROC" --master-port "$port" \
    scripts/device/cause_threads_worker.py "$mode" >"$log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 180); do  # at most 90 s for every rank
    [ "$(grep -c '^READY' "$log")" -ge "$NPROC" ] && break
    sleep 0.5
  done
  if [ "$(grep -c '^READY' "$log")" -lt "$NPROC" ]; then
    say "FAIL $mode: the job did not start"
    tail -15 "$log" | tee -a "$S"
    stop_all
    continue
  fi
  if [ "${GPUTUI_DEVICE_DRYRUN:-0}" = 1 ]; then
    GPUTUI_STANDIN_PIDS=$(grep -o '^READY rank=[0-9]* pid=[0-9]*' "$log" | sort -t= -k2 -n |
      sed 's/.*pid=//' | paste -sd,)
    export GPUTUI_STANDIN_PIDS
  fi
  (timeout 90 "$PY" -m gputui check --json --duration 22 --interval 0.5 \
    2>"$O/cause_$mode.check.err"; echo "{\"_exit\": $?}") | stamp >"$O/cause_$mode.jsonl"
  "$PY" - "$O/cause_$mode.jsonl" "$log" "$mode" "$NPROC" <<'PY' | tee -a "$S"
import json, re, sys
path, log, mode, nproc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
lines = [json.loads(x) for x in open(path) if x.strip()]
rc = next((d["_exit"] for d in lines if "_exit" in d), None)
lines = [d for d in lines if "_exit" not in d]
culprit = nproc - 1
m = re.search(rf"^READY rank={culprit} pid=(\d+) t=([\d.]+)", open(log).read(), re.M)
onset = float(m.group(2)) if m else None
want = {
    "gil": r"thread `stats` holds the GIL in parse_record",
    "poll": r"spins in poll_ready",
    "loader": rf"DataLoader worker 1 of rank {culprit} \(pid \d+\) is stuck in fetch_record",
    "loader-kill": r"DataLoader worker \(pid",
}[mode]
for d in lines:
    rel = f"{d['_arrived'] - onset:+6.1f}s" if onset else "?"
    print(f"  {rel} {d['state']:8s} {d['reason'][:160]}")
said = lambda d: [d["reason"], *(d.get("findings") or [])]  # noqa: E731
hit = next((d for d in lines if any(re.search(want, s) for s in said(d))), None)
away = any("on another node" in s for d in lines for s in said(d))
busy = any(d["state"] == "busy" for d in lines)
if hit is None:
    print(f"FAIL {mode}: exit {rc}; nothing named the cause ({want})")
else:
    line = next(s for s in said(hit) if re.search(want, s))
    took = f"+{hit['_arrived'] - onset:.1f} s after the onset" if onset else "?"
    gputui = f"+{hit['t'] - hit['since']:.1f} s after the spin" if hit.get("since") else ""
    ok = rc not in (0, None) and not busy and not away
    print(f"{'PASS' if ok else 'FAIL'} {mode}: exit {rc}; {took} ({gputui}): {line[:220]}"
          + ("; said busy" if busy else "") + ("; said 'on another node'" if away else ""))
PY
  head -3 "$O/cause_$mode.check.err" | tee -a "$S"
  stop_all
done
