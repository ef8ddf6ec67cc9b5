#!/usr/bin/env bash
# Issue 31 on a 4-GPU node, part 2 of 2: the hang verdicts with one rank per GPU, and the
# probes. Part 1 (cost, stragglers): scripts/device/check_nodes4.sh.
#   LIMIT=420 bash scripts/device/run_all.sh n4b check_verdicts4       (about 7.5 min; CASES="xid probes" for a subset)
#
# For each case `gputui check --json` runs from the job's READY; every line is stamped on
# arrival, and the onset is the worker's ONSET/PHASE line: the figure is onset -> first alarm
# and onset -> the headline that names the cause. The dashboard runs at 80x24 in tmux beside
# it and is captured at the end, no key pressed.
#   mismatch-fr  rank 3 calls broadcast while ranks 0-2 call all_reduce, flight recorder on
#   mismatch     the same without the flight recorder (RAS and the stacks only)
#   stuck        rank 3 sleeps in load_next_batch_stuck() (the CPU-stuck rank)
#   ddp          rank 1 skips a layer of its DDP model: DDP's "Expected to have finished..."
#   xid          rank 1 stores far out of bounds from a Triton kernel: a real Xid 31
# Then `gputui probe --json` over the 4 GPUs beside a bare torch copy, and the world probe over
# two local "hosts" of 2 GPUs each.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
O="${OUT:?}"
S="$O/verdicts4_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
JOB=
. scripts/device/common.sh
stop_job() { stop_group "$JOB"; JOB=; }
cleanup() { stop_job; tmux kill-server 2>/dev/null; }
trap cleanup EXIT
trap 'cleanup; exit 143' TERM INT
say "INFO $(nvidia-smi -L | tr '\n' ';')"

run_case() {  # NAME RECORD(0/1) -- LAUNCH...
  local name=$1 rec=$2; shift 3
  local log="$O/v4_${name}_job.txt"
  setsid "$@" >"$log" 2>&1 &
  JOB=$!
  for _ in $(seq 1 120); do
    [ "$(grep -c '^READY' "$log")" -ge 4 ] && break
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.5
  done
  [ "$(grep -c '^READY' "$log")" -ge 4 ] || { say "FAIL $name: job did not start"; tail -5 "$log" >>"$S"; stop_job; return; }
  [ "$rec" = 1 ] && { timeout 50 python3 -m gputui record --force "$O/v4_${name}.trace.jsonl.gz" \
    --duration 34 --interval 0.5 >/dev/null 2>"$O/v4_${name}_record.err" & }
  tmux new-session -d -s dash -x 80 -y 24 "python3 -m gputui --no-mouse"
  timeout 60 python3 -m gputui check --json --duration 34 --interval 0.5 \
    2>"$O/v4_${name}.err" | stamp >"$O/v4_${name}.jsonl"
  local rc=${PIPESTATUS[0]}
  tmux capture-pane -p -t dash >"$O/v4_${name}_80x24.txt" 2>&1
  tmux kill-server 2>/dev/null
  wait
  stop_job
  python3 - "$O/v4_${name}.jsonl" "$log" "$name" "$rc" <<'PY' | tee -a "$S"
import json, re, sys
path, log, name, rc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
text = open(log, errors="replace").read()
m = re.search(r"^(?:ONSET|PHASE) rank=(\d+) pid=(\d+).*? t=([\d.]+)", text, re.M)
onset = float(m.group(3)) if m else None
lines = [json.loads(x) for x in open(path) if x.strip()]
def at(d):
    return f"+{d['_arrived'] - onset:.1f} s" if onset else "?"
alarm = next((d for d in lines if d["state"] not in ("ok", "slow", "busy")), None)
slow_before = [d for d in lines if d["state"] == "slow" or "wait alike" in d.get("reason", "")]
print(f"{name}: exit {rc}, {len(lines)} lines, odd rank pid {m.group(2) if m else '?'}")
if alarm:
    print(f"  first alarm {at(alarm)}: {alarm['state']} {alarm['reason'][:200]}")
seen = []
for d in lines:
    if d["reason"] not in seen:
        seen.append(d["reason"])
        print(f"  {at(d)} {d['state']}: {d['reason'][:260]}")
print(f"  slow/alike lines: {len(slow_before)}; last suspect_pids {lines[-1].get('suspect_pids') if lines else None}")
want = {
    "mismatch-fr": ("ranks in different collectives: ", "broadcast"),
    "mismatch": ("ranks in different collectives: ", "broadcast"),
    "stuck": ("rank 3", "load_next_batch_stuck"),
    "ddp": ("rank 1", "Expected to have finished reduction"),
    "xid": ("rank 1", "illegal memory access"),
}[name]
head = next((d for d in lines if want[0] in d["reason"] and want[1] in d["reason"]), None)
ok = rc == 1 and head is not None and not slow_before
print(("PASS" if ok else "FAIL") + f" {name}: headline {at(head) if head else 'never'}"
      + (f": {head['reason'][:200]}" if head else ""))
PY
  say "-- 80x24, no key:"; cat "$O/v4_${name}_80x24.txt" >>"$S"
}

CASES=" ${CASES:-mismatch-fr mismatch stuck ddp xid probes} "  # a subset: CASES="xid probes"
want() { [[ "$CASES" == *" $1 "* ]]; }
MW=(python3 scripts/device/multi_worker.py --spawn 4)
want mismatch-fr && run_case mismatch-fr 1 -- env TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/gputui-frpipe_ \
  TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/gputui-frdump_ TORCH_FR_BUFFER_SIZE=2000 \
  "${MW[@]}" mismatch 80 --onset 8 --odd 3
want mismatch && run_case mismatch 0 -- "${MW[@]}" mismatch 80 --onset 8 --odd 3
want stuck && run_case stuck 1 -- "${MW[@]}" stuck 80 --onset 8 --odd 3
RW=(python3 scripts/device/rank_worker.py --world 4 --seconds 80)
want ddp && run_case ddp 0 -- "${RW[@]}" --die 1:8:ddp
want xid && run_case xid 1 -- "${RW[@]}" --die 1:8:xid

# ---------------------------------------------------------------- the probes
want probes || { say "INFO done"; exit 0; }
t0=$(date +%s.%N)
timeout -k 5 120 python3 -m gputui probe --json >"$O/v4_probe.json" 2>"$O/v4_probe.err"
rc=$?
wall=$(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$t0")
SIZE=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['size_bytes'])" "$O/v4_probe.json" 2>/dev/null || echo 268435456)
timeout -k 5 100 python3 scripts/device/bare_copy.py "$SIZE" --all >"$O/v4_bare.json" 2>"$O/v4_bare.err"
python3 - "$O/v4_probe.json" "$O/v4_bare.json" "$rc" "$wall" <<'PY' | tee -a "$S"
import json, statistics, sys
d = json.load(open(sys.argv[1])); rc, wall = int(sys.argv[3]), float(sys.argv[4])
try:
    bare = json.load(open(sys.argv[2]))
except Exception:
    bare = {}
pct = [100 * c["gbps"] / bare[f"{c['src']}->{c['dst']}"] for c in d["copy"]
       if c["gbps"] and bare.get(f"{c['src']}->{c['dst']}")]
bus = [a["busbw_gbps"] for a in d["allreduce"] if a["busbw_gbps"]]
ok = rc == 0 and d["ok"] and len(d["pairs"]) == 6
print(f"{'PASS' if ok else 'FAIL'} probe matrix: exit {rc}, wall {wall} s, {len(d['pairs'])} pairs, "
      f"copy {min(c['gbps'] or 0 for c in d['copy']):.0f}-{max(c['gbps'] or 0 for c in d['copy']):.0f} GB/s, "
      f"probe/bare median {statistics.median(pct) if pct else 0:.0f}% min {min(pct, default=0):.0f}%, "
      f"all_reduce busbw {min(bus, default=0):.0f}-{max(bus, default=0):.0f} GB/s")
PY
t0=$(date +%s.%N)
timeout -k 5 120 python3 -m gputui probe --hosts h1,h2 --launcher local --gpus-per-host 2 \
  --port 29611 --host-timeout 60 --json >"$O/v4_world.jsonl" 2>"$O/v4_world.err"
rc=$?
say "$([ $rc = 0 ] && echo PASS || echo FAIL) world probe h1,h2 x 2 GPUs: exit $rc, wall $(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$t0") s"
grep '"kind": "world"' "$O/v4_world.jsonl" | cut -c1-400 | tee -a "$S"
say "INFO done"
