#!/usr/bin/env bash
# Issue 3 on a 2-GPU node: `gputui check` (live) against four real 2-rank NCCL jobs, and the
# dashboard's banner during the hang. Expected: hang and die -> exit 1 with suspect [1];
# heavy all_reduce traffic and an idle job holding memory -> exit 0, no alarm.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/detector_summary.txt"
: >"$S"
JOB=
stop_job() { [ -n "$JOB" ] && { kill -TERM -- -"$JOB" 2>/dev/null; sleep 2; kill -KILL -- -"$JOB" 2>/dev/null; }; JOB=; }
trap stop_job EXIT

for mode in hang die heavy idle; do
  port=$((29900 + RANDOM % 90))
  setsid python3 -m torch.distributed.run --nproc-per-node 2 --master-port "$port" \
    device/hang_worker.py "$mode" 60 >"$O/det_${mode}_job.txt" 2>&1 &
  JOB=$!
  for _ in $(seq 1 120); do
    [ "$(grep -o 'READY' "$O/det_${mode}_job.txt" | wc -l)" -ge 2 ] && break
    sleep 0.5
  done
  t0=$(date +%s.%N)
  timeout 60 python3 -m gputui check --json --duration 25 --interval 0.5 >"$O/det_${mode}.jsonl" 2>"$O/det_${mode}.err"
  rc=$?
  echo "$mode: exit $rc; lines:" | tee -a "$S"
  python3 - "$O/det_${mode}.jsonl" "$t0" <<'PY' | tee -a "$S"
import json, sys
t0 = float(sys.argv[2])
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(f"  +{d['t'] - t0:5.1f}s {d['state']:8s} spinning={d['spinning']} suspects={d['suspects']} pids={d.get('suspect_pids')} :: {d['reason'][:160]}")
PY
  if [ "$mode" = hang ]; then
    timeout 60 python3 device/app_frame.py "$O/det_hang_app.svg" 12 >"$O/det_hang_app.txt" 2>&1
    grep -m1 banner: "$O/det_hang_app.txt" | tee -a "$S"
  fi
  nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,power.draw --format=csv,noheader >>"$S"
  stop_job
done
