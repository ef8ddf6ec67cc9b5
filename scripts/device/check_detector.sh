#!/usr/bin/env bash
# The hang detector live on a 2-GPU node: `gputui check --json` alongside four real 2-rank
# NCCL jobs (scripts/device/hang_worker.py), plus the dashboard's banner during the hang and a
# recording of each hang. Run through run_all.sh (it sets PYTHONPATH, OUT and the NCCL env):
#   bash scripts/device/run_all.sh TAG check_detector
# Expected: hang and die -> exit 1, spinning [0], suspects [1]; heavy and idle -> exit 0 with
# no alarm. One PASS/FAIL line per mode in $OUT/detector_summary.txt. About 3 minutes.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/detector_summary.txt"
: >"$S"
JOB=
stop_job() {
  [ -n "$JOB" ] || return 0
  kill -TERM -- -"$JOB" 2>/dev/null
  sleep 2
  kill -KILL -- -"$JOB" 2>/dev/null
  JOB=
}
trap stop_job EXIT

# mode  seconds-of-check  expected-exit  launcher ("torchrun", or "spawn": no elastic agent,
# which would otherwise kill rank 0 as soon as rank 1 dies)
for spec in "hang 30 1 torchrun" "die 30 1 spawn" "heavy 20 0 torchrun" "idle 20 0 torchrun"; do
  read -r mode dur want how <<<"$spec"
  log="$O/det_${mode}_job.txt"
  if [ "$how" = spawn ]; then
    setsid python3 scripts/device/hang_worker.py --spawn "$mode" 120 >"$log" 2>&1 &
  else
    setsid python3 -m torch.distributed.run --nproc-per-node 2 \
      --master-port $((29900 + RANDOM % 90)) scripts/device/hang_worker.py "$mode" 120 >"$log" 2>&1 &
  fi
  JOB=$!
  for _ in $(seq 1 140); do  # at most 70 s for both ranks to be ready
    [ "$(grep -o 'READY rank=' "$log" | wc -l)" -ge 2 ] && break  # lines may interleave
    sleep 0.5
  done
  grep 'READY rank=' "$log" | tee -a "$S"
  t0=$(date +%s.%N)
  pids=()
  if [ "$mode" = hang ]; then  # the dashboard's banner, headless, while the hang goes on
    timeout 45 python3 scripts/device/app_frame.py "$O/det_hang_app.svg" 14 >"$O/det_hang_app.txt" 2>&1 &
    pids+=($!)
  fi
  if [ "$want" = 1 ]; then  # keep a recording of the real hang (with the power limit)
    timeout 45 python3 -m gputui record --force "$O/det_${mode}.trace.jsonl.gz" --duration "$dur" \
      --interval 0.25 >/dev/null 2>"$O/det_${mode}_record.err" &
    pids+=($!)
  fi
  timeout 50 python3 -m gputui check --json --duration "$dur" --interval 0.5 \
    >"$O/det_${mode}.jsonl" 2>"$O/det_${mode}.err"
  rc=$?
  for p in "${pids[@]}"; do wait "$p"; done
  python3 - "$O/det_${mode}.jsonl" "$t0" "$mode" "$rc" "$want" <<'PY' | tee -a "$S"
import json, sys
path, t0, mode, rc, want = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
lines = [json.loads(x) for x in open(path) if x.strip()]
for d in lines:
    print(f"  +{d['t'] - t0:5.1f}s {d['state']:8s} spinning={d['spinning']} "
          f"suspects={d['suspects']} pids={d.get('suspect_pids')} :: {d['reason'][:150]}")
alarms = [d for d in lines if d["state"] != "ok"]
if want:
    first = alarms[0] if alarms else None
    ok = rc == 1 and first is not None and first["spinning"] == [0] and first["suspects"] == [1]
    lat = f"first alarm +{first['t'] - t0:.1f}s after check start" if first else "no alarm"
else:
    ok, lat = rc == 0 and not alarms, f"{len(alarms)} alarm line(s)"
print(f"{'PASS' if ok else 'FAIL'} {mode}: exit {rc} (want {want}), {lat}")
PY
  [ -s "$O/det_${mode}.err" ] && head -3 "$O/det_${mode}.err" | tee -a "$S"
  if [ "$mode" = hang ]; then
    grep -m1 '^banner:' "$O/det_hang_app.txt" | cut -c1-300 | tee -a "$S"
  fi
  nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,power.draw,power.limit \
    --format=csv,noheader >>"$S"
  stop_job
done
