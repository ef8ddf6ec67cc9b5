#!/usr/bin/env bash
# A named straggler whose rank dies, on a 4-GPU node, one rank per GPU:
#   LIMIT=150 bash scripts/device/run_all.sh dies check_straggler_dies
#
# rank_worker.py, 4 ranks: rank 2 does 2.5x the matmuls (named the straggler within ~10 s),
# then 22 s in raises a Python error (its `[rank2]:` traceback in the job's one output file,
# as `srun -o`) while ranks 0, 1 and 3 wait in all_reduce. Before the fix the detector's held
# straggler named a GPU the job no longer had: a KeyError, `check` exiting 5 and the dashboard
# stopping at "sampling failed". Now: slow, then stalled with rank 2's last words, exit 1,
# and the 80x24 dashboard (tmux, no key) still drawing.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
O="${OUT:?}"
S="$O/dies_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
JOB=
. scripts/device/common.sh
cleanup() { stop_group "$JOB"; JOB=; tmux kill-server 2>/dev/null; }
trap cleanup EXIT
trap 'cleanup; exit 143' TERM INT

say "INFO $(nvidia-smi -L | tr '\n' ';')"
log="$O/dies_job.txt"
setsid python3 scripts/device/rank_worker.py --world 4 --seconds 60 --ratio 2:2.5 \
  --die 2:22:raise --output "$O/dies_job.out" >"$log" 2>&1 &
JOB=$!
for _ in $(seq 1 120); do
  [ "$(cat "$O/dies_job.out" 2>/dev/null | grep -c '^READY')" -ge 4 ] && break
  sleep 0.5
done
t0=$(date +%s.%N)
tmux new-session -d -s dash -x 80 -y 24 "python3 -m gputui --no-mouse"
timeout 70 python3 -m gputui check --json --duration 45 --interval 0.5 \
  2>"$O/dies_check.err" | stamp >"$O/dies_check.jsonl"
rc=${PIPESTATUS[0]}
tmux capture-pane -p -t dash >"$O/dies_80x24.txt" 2>&1
tmux kill-server 2>/dev/null
grep 'what=die' "$O/dies_job.out" | head -1 | tee -a "$S"
python3 - "$O/dies_check.jsonl" "$rc" "$t0" <<'PY' | tee -a "$S"
import json, sys
path, rc, t0 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
lines = [json.loads(x) for x in open(path) if x.strip()]
for d in lines:
    print(f"  +{d['_arrived'] - t0:5.1f} s {d['state']:8s} {d['reason'][:150]}")
slow = next((d for d in lines if d["state"] == "slow"), None)
alarm = next((d for d in lines if d["state"] in ("stalled", "hung")), None)
ok = rc == 1 and slow is not None and 2 in (slow.get("stragglers") or [])
ok = ok and alarm is not None and "rank 2" in alarm["reason"]
print(("PASS" if ok else "FAIL") + f" exit {rc}: slow (straggler 2) then an alarm naming rank 2")
PY
say "-- stderr of check:"; head -5 "$O/dies_check.err" >>"$S"
say "-- 80x24, no key:"; cat "$O/dies_80x24.txt" >>"$S"
grep -q "sampling failed" "$O/dies_80x24.txt" && say "FAIL the dashboard stopped sampling"
grep -q "probe host" "$O/dies_80x24.txt" && say "FAIL the dashboard offers to probe a host: the rank died here"
say "INFO done"
