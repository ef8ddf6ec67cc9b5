#!/usr/bin/env bash
# Issue 10 on a 2-GPU node: NCCL RAS and the flight recorder on a real 2-rank NCCL hang
# (rank 1 sleeps in a "data loader", rank 0 waits in all_reduce), and the same job watched
# as two nodes (--gpus 0 --host a, --gpus 1 --host b) and merged. Run through run_all.sh:
#   bash scripts/device/run_all.sh TAG check_nodes
# Writes: ras-*.txt (the raw RAS answers, text and JSON, for tests/data/ras), nccl-record.json
# (the gatherer's record), a.jsonl, b.jsonl, merged.jsonl, and PASS/FAIL lines in
# $OUT/nodes_summary.txt. Expected: RAS names rank 1 behind; the flight recorder's analyzer
# says rank 1 did not join; the merge names b:1. About 2 minutes.
set -u
O="${OUT:?}"
S="$O/nodes_summary.txt"
: >"$S"
export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/gputui_frpipe_
export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/gputui_frdump_
rm -f /tmp/gputui_frpipe_* /tmp/gputui_frdump_*
log="$O/nodes_job.txt"
setsid python3 scripts/device/hang_worker.py --spawn hang 150 >"$log" 2>&1 &
JOB=$!
trap 'kill -TERM -- -$JOB 2>/dev/null; sleep 2; kill -KILL -- -$JOB 2>/dev/null' EXIT
for _ in $(seq 1 140); do
  [ "$(grep -o 'READY rank=' "$log" | wc -l)" -ge 2 ] && break
  sleep 0.5
done
grep 'READY rank=' "$log" | tee -a "$S"
# 1. the raw answers, with their latency (these become captured test data)
. scripts/device/common.sh
ras_raw "$O" 2rank | tee -a "$S"
# 2. the two "nodes", checked at the same time, then merged
timeout 60 python3 -m gputui check --json --duration 25 --interval 0.5 --gpus 0 --host a \
  >"$O/a.jsonl" 2>"$O/a.err" &
A=$!
timeout 60 python3 -m gputui check --json --duration 25 --interval 0.5 --gpus 1 --host b \
  >"$O/b.jsonl" 2>"$O/b.err" &
B=$!
# 3. the NCCL gatherer on the job, as the Watcher runs it, while the checks watch
python3 - "$O" <<'PY' 2>&1 | tee -a "$S"
import json, sys, threading, time
from dataclasses import dataclass
from gputui.collect.live import LiveSource
from gputui.diagnose.nccl.ras import explain_nccl
from gputui.diagnose.verdict import Verdict
from gputui.tools.gather.nccl import gather_nccl

out = sys.argv[1]
src = LiveSource()
snap = src.sample()
job = snap.jobs[0]
procs = tuple(p for p in snap.processes if p.pid in job.pids)

@dataclass
class Target:
    key: str
    label: str
    trigger: str
    verdict: Verdict
    ranks: tuple

v = Verdict(t=snap.t, state="stalled", spinning=(0,), suspects=(1,))
t = time.monotonic()
rec = gather_nccl(Target(job.key, job.label, "stalled", v, procs), threading.Event())
took = time.monotonic() - t
json.dump(rec, open(f"{out}/nccl-record.json", "w"), indent=1)
ev = explain_nccl(json.loads(json.dumps(rec)), v, snap)
print(f"gather_nccl took {took:.1f} s; RAS latencies "
      f"{[q['latency_s'] for q in rec['ras']['queries']]}; flight recorder "
      f"{rec.get('flightrec', {}).get('outcome')} after {rec.get('flightrec', {}).get('waited_s')} s")
for f in ev.findings:
    print("  finding:", f)
behind = any("rank 1" in f and "behind" in f for f in ev.findings)
fr = any("missing rank 1" in f for f in ev.findings)
print(f"{'PASS' if behind else 'FAIL'} RAS names rank 1 behind")
print(f"{'PASS' if fr else 'FAIL'} flight recorder names rank 1 missing")
PY
wait $A $B
python3 -m gputui merge --json "$O/a.jsonl" "$O/b.jsonl" >"$O/merged.jsonl" 2>"$O/merged.err"
python3 - "$O/merged.jsonl" <<'PY' | tee -a "$S"
import json, sys
last = [json.loads(x) for x in open(sys.argv[1]) if x.strip()][-1]
print("merged:", last["state"], last["spinning"], last["suspects"], last["suspect_ranks"])
ok = last["suspects"] == ["b:1"] and last["suspect_ranks"] == [1]
print(f"{'PASS' if ok else 'FAIL'} merge names b:1 (rank 1)")
PY
