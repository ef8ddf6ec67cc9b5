#!/usr/bin/env bash
# Stragglers on two real GPUs (kind nvidia-h100-x2): one rank per GPU, rank 0 doing 16x the
# matmuls of rank 1 (straggler_worker.py imbalanced, STRAGGLER_SEPARATE_GPUS=1), then a
# communication-only job. Checks: `check --json --fail-on-slow` names the straggler (rank 0,
# GPU 0) within 15 s of the job's start and exits 4; the dashboard at 80x24 in tmux says it
# with no key; the all_reduce-only job stays silent (exit 0). Recordings kept as test data.
#   LIMIT=200 bash scripts/device/run_all.sh s2 check_straggler_2gpu
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export STRAGGLER_SEPARATE_GPUS=1
O="${OUT:?}"
S="$O/straggler2_summary.txt"
: >"$S"
. "$(dirname "$0")/common.sh"
JOB=
trap 'stop_group "$JOB"; tmux kill-server 2>/dev/null' EXIT
echo "INFO $(nvidia-smi -L | tr '\n' ' ')" | tee -a "$S"

for mode in imbalanced comm; do
  log="$O/s2_${mode}_job.txt"
  setsid python3 scripts/device/straggler_worker.py "$mode" 45 >"$log" 2>&1 &
  JOB=$!
  for _ in $(seq 1 90); do
    [ "$(grep -c '^READY' "$log")" -ge 2 ] && break
    sleep 0.5
  done
  t0=$(date +%s.%N)
  echo "INFO $mode ready: $(grep -c '^READY' "$log") ranks" | tee -a "$S"
  timeout 40 python3 -m gputui record --force "$O/s2_${mode}.trace.jsonl.gz" --duration 22 \
    --interval 0.25 >/dev/null 2>"$O/s2_${mode}_record.err" &
  rec=$!
  if [ "$mode" = imbalanced ]; then
    tmux new-session -d -s dash -x 80 -y 24 "python3 -m gputui --no-mouse"
  fi
  timeout 40 python3 -m gputui check --json --duration 22 --interval 0.5 --fail-on-slow \
    >"$O/s2_${mode}.jsonl" 2>"$O/s2_${mode}.err"
  rc=$?
  if [ "$mode" = imbalanced ]; then
    tmux capture-pane -p -t dash >"$O/s2_dashboard_80x24.txt" 2>&1
    tmux kill-server 2>/dev/null
  fi
  wait "$rec"
  stop_group "$JOB"
  JOB=
  python3 - "$O/s2_${mode}.jsonl" "$mode" "$rc" <<'PY' | tee -a "$S"
import json, sys
path, mode, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = [json.loads(x) for x in open(path) if x.strip()]
t0 = lines[0]["t"] if lines else 0
states = [(round(d["t"] - t0, 1), d["state"]) for d in lines]
slow = next((d for d in lines if d["state"] == "slow"), None)
print(f"{mode}: exit {rc}, states {states}")
if slow:
    print(f"  first slow at +{slow['t'] - t0:.1f} s: {slow['reason']}")
    print(f"  stragglers: {json.dumps(slow.get('stragglers'))[:600]}")
if mode == "imbalanced":
    ok = rc == 4 and slow is not None and slow["t"] - t0 <= 15
else:
    ok = rc == 0 and all(d["state"] == "ok" for d in lines)
print(("PASS" if ok else "FAIL") + f" {mode}")
PY
done
echo "== dashboard at 80x24, end of the imbalanced run:" | tee -a "$S"
cat "$O/s2_dashboard_80x24.txt" | tee -a "$S"
