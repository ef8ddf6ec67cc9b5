#!/usr/bin/env bash
# Issue 31 on a 4-GPU node, part 1 of 2: gputui's cost beside nvitop (idle, then a busy
# 4-rank job with a changing process table), and the straggler verdicts, one rank per GPU.
#   LIMIT=560 bash scripts/device/run_all.sh n4a check_nodes4
# Part 2 (the hang verdicts, the probes): scripts/device/check_verdicts4.sh.
#
# 1. bench/app_cpu.py --apps gputui nvitop floor: together for 45 s (CPU, peak RSS), then
#    5 starts of each alone (first frame), 160x50; idle GPUs, then all 4 busy (rank_worker.py,
#    balanced) while short-lived processes come and go; a py-spy record of the dashboard and
#    its CPU per thread over the same 20 s (which thread costs what on a real driver).
# 2. rank_worker.py, 4 ranks: rank 2 with 2.5x the matmuls, rank 1 with 1.5x, rank 3 asleep
#    40 ms a step in load_batch() (host-bound), and a balanced job. For each: `gputui check
#    --json --fail-on-slow` (the host-bound one with --profile-straggler) from the job's start,
#    the dashboard at 80x24 in tmux with no key, and (2.5x, host-bound) a recording.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
O="${OUT:?}"
S="$O/nodes4_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
JOB= CHURN=
. scripts/device/common.sh
stop_job() { stop_group "$JOB"; JOB=; }
cleanup() { stop_job; [ -n "$CHURN" ] && kill "$CHURN" 2>/dev/null; tmux kill-server 2>/dev/null; }
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

# ---------------------------------------------------------------- 1. cost
app_cost idle
start_job "$O/n4_busy_job.txt" --seconds 240 || exit 1
(while :; do for _ in 1 2 3 4 5; do sleep 0.$((RANDOM % 9 + 1)) & done; sleep 0.5; done) &
CHURN=$!
say "INFO busy: $(nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,power.draw --format=csv,noheader | tr '\n' ';')"
app_cost busy
tmux new-session -d -s prof -x 160 -y 50 "python3 -m gputui"
sleep 3
pid=$(pgrep -f '^python3 -m gputui$' | head -1)
if [ -n "$pid" ]; then
  py-spy dump -p "$pid" --nonblocking 2>/dev/null | grep '^Thread' >"$O/n4_threads.txt"
  ticks() { for t in /proc/"$pid"/task/*; do echo "${t##*/} $(cut -d' ' -f14,15 "$t/stat")"; done; }
  ticks >"$O/n4_ticks0.txt"
  timeout -k 5 30 py-spy record -p "$pid" -d 20 -r 100 -f raw -o "$O/n4_prof.txt" --nonblocking \
    >/dev/null 2>&1
  ticks >"$O/n4_ticks1.txt"
  say "== the dashboard's CPU ticks per thread over those 20 s (py-spy's own pauses included)"
  python3 - "$O/n4_threads.txt" "$O/n4_ticks0.txt" "$O/n4_ticks1.txt" <<'PY' | tee -a "$S"
import re, sys
names = {m[1]: m[2] for m in re.finditer(r"Thread (\d+) \([^)]*\): \"([^\"]*)\"", open(sys.argv[1]).read())}
def read(path):
    return {f[0]: int(f[1]) + int(f[2]) for f in (ln.split() for ln in open(path)) if len(f) == 3}
a, b = read(sys.argv[2]), read(sys.argv[3])
rows = sorted(((b[t] - a.get(t, 0), names.get(t, t)) for t in b), reverse=True)
print(f"total {sum(d for d, _ in rows)} ticks: " + ", ".join(f"{n} {d}" for d, n in rows if d))
PY
  say "== py-spy of the dashboard on 4 busy GPUs, 20 s: top own frames"
  python3 - "$O/n4_prof.txt" <<'PY' | tee -a "$S"
import collections, sys
own, tot = collections.Counter(), 0
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    tot += int(n); own[stack.split(";")[-1][:110]] += int(n)
print("samples", tot)
for k, v in own.most_common(10): print(f"{v:6d}  {k}")
PY
fi
tmux kill-server 2>/dev/null
kill "$CHURN" 2>/dev/null; CHURN=
stop_job

# ---------------------------------------------------------------- 2. stragglers
straggle() {  # NAME EXPECT RECORD(0/1) EXTRA-CHECK-ARGS -- WORKER ARGS
  local name=$1 expect=$2 rec=$3 extra=$4; shift 5
  start_job "$O/n4_${name}_job.txt" --seconds 60 "$@" || return
  local t0; t0=$(date +%s.%N)
  [ "$rec" = 1 ] && { timeout 45 python3 -m gputui record --force "$O/n4_${name}.trace.jsonl.gz" \
    --duration 30 --interval 0.5 >/dev/null 2>"$O/n4_${name}_record.err" & }
  tmux new-session -d -s dash -x 80 -y 24 "python3 -m gputui --no-mouse"
  # shellcheck disable=SC2086
  timeout 60 python3 -m gputui check --json --duration 35 --interval 0.5 --fail-on-slow $extra \
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
