#!/usr/bin/env bash
# Issue 31 items 3-4 on a 4-GPU node: the straggler verdicts, one rank per GPU.
#   LIMIT=240 bash scripts/device/run_all.sh n4 check_stragglers4
# (Cost beside nvitop: check_cost4.sh; the hang verdicts and probes: check_verdicts4.sh.)
#
# rank_worker.py, 4 ranks: rank 2 with 2.5x the matmuls, rank 3 asleep 40 ms a step in
# load_batch() (host-bound), rank 1 with 1.5x, and a balanced job. For each: `gputui check
# --json --fail-on-slow` (the host-bound one with --profile-straggler) from the job's READY,
# the dashboard at 80x24 in tmux with no key, and (2.5x, host-bound) a recording.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
O="${OUT:?}"
S="$O/stragglers4_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
JOB=
. scripts/device/common.sh
stop_job() { stop_group "$JOB"; JOB=; }
cleanup() { stop_job; tmux kill-server 2>/dev/null; }
trap cleanup EXIT
trap 'cleanup; exit 143' TERM INT

say "INFO $(nvidia-smi -L | tr '\n' ';'); $(nproc) cores; driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
nvidia-smi topo -m >"$O/n4_topo.txt" 2>&1
pynvml_dir=$(python3 -c 'import os, pynvml; print(os.path.dirname(pynvml.__file__))')
python3 -m compileall -q -j 0 /tmp/site "$PWD/gputui" "$pynvml_dir" >/dev/null 2>&1

start_job() {  # LOG ARGS...: rank_worker.py, 4 ranks; returns once all are READY
  local log=$1; shift
  setsid python3 scripts/device/rank_worker.py --world 4 "$@" >"$log" 2>&1 &
  JOB=$!
  for _ in $(seq 1 120); do
    [ "$(grep -c '^READY' "$log")" -ge 4 ] && return 0
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.5
  done
  say "FAIL job did not start: $(tail -3 "$log" | tr '\n' ' ')"
  return 1
}

app_cost() {  # TAG: app_cpu.py together 45 s + 5 starts alone
  (cd bench && timeout -k 5 150 python3 app_cpu.py --apps gputui nvitop floor --duration 45 \
    --frames 5 --frame-timeout 20 --interval 1 --size 160x50 --runner auto \
    --nvitop "python3 -m nvitop" --gputui "python3 -m gputui" --json "$O/n4_cost_$1.json") \
    >"$O/n4_cost_$1.txt" 2>&1
  say "== cost $1: exit $?"
  tail -12 "$O/n4_cost_$1.txt" | tee -a "$S"
}

# ---------------------------------------------------------------- 2. stragglers
straggle() {  # NAME EXPECT RECORD(0/1) EXTRA-CHECK-ARGS -- WORKER ARGS
  local name=$1 expect=$2 rec=$3 extra=$4; shift 5
  start_job "$O/n4_${name}_job.txt" --seconds 50 "$@" || return
  local t0; t0=$(date +%s.%N)
  [ "$rec" = 1 ] && { timeout 45 python3 -m gputui record --force "$O/n4_${name}.trace.jsonl.gz" \
    --duration 28 --interval 0.5 >/dev/null 2>"$O/n4_${name}_record.err" & }
  tmux new-session -d -s dash -x 80 -y 24 "python3 -m gputui --no-mouse"
  # shellcheck disable=SC2086
  timeout 60 python3 -m gputui check --json --duration 28 --interval 0.5 --fail-on-slow $extra \
    2>"$O/n4_${name}.err" | stamp >"$O/n4_${name}.jsonl"
  local rc=${PIPESTATUS[0]}
  tmux capture-pane -p -t dash >"$O/n4_${name}_80x24.txt" 2>&1
  tmux kill-server 2>/dev/null
  wait
  stop_job
  python3 - "$O/n4_${name}.jsonl" "$name" "$rc" "$t0" "$expect" <<'PY' | tee -a "$S"
import json, sys
path, name, rc, t0, expect = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
lines = [json.loads(x) for x in open(path) if x.strip()]
states = [(round(d["_arrived"] - t0, 1), d["state"], tuple(d.get("stragglers") or ())) for d in lines]
slow = next((d for d in lines if d["state"] == "slow"), None)
named = {tuple(s) for _, st, s in states if st == "slow"}
flips = sum(1 for a, b in zip(states, states[1:]) if (a[1], a[2]) != (b[1], b[2]))
print(f"{name}: exit {rc}, {len(lines)} lines, changes {flips}, states {states[:12]}")
if slow:
    print(f"  first slow +{slow['_arrived'] - t0:.1f} s after READY: {slow['reason'][:300]}")
    print(f"  wait shares {slow.get('wait_share')}")
prof = next((d.get("profile") for d in reversed(lines) if d.get("profile")), None)
if prof:
    print(f"  profile: {prof.get('where')} (idle {prof.get('idle_share')}, {prof.get('samples')} samples)")
    print(f"  top {[(e['frame'][:60], e['share'], e.get('idle')) for e in prof.get('top_self', [])[:4]]}")
if expect == "none":
    ok = rc == 0 and not named
else:
    ok = rc == 4 and named == {tuple(int(x) for x in expect.split(","))}
    ok = ok and slow is not None and slow["_arrived"] - t0 <= 15
print(("PASS" if ok else "FAIL") + f" {name} (expect stragglers {expect})")
PY
  say "-- 80x24, no key:"; cat "$O/n4_${name}_80x24.txt" >>"$S"
}
straggle s25 2 1 "" -- --ratio 2:2.5
straggle hostbound 3 1 "--profile-straggler" -- --input-sleep 3:0.04
straggle s15 1 0 "" -- --ratio 1:1.5
straggle balanced none 0 "" --
say "INFO done"
