#!/usr/bin/env bash
# Stragglers on one real GPU (docs/stragglers.md). A GPU straggler needs several GPUs (NVML's
# per-process SM% is the same for ranks that time-slice one GPU), so on one GPU this checks:
#  1. the clock event reasons, power and SM clock NVML reports at idle and under an
#     imbalanced 2-rank NCCL job (rank 0 does 16x the matmuls), as the why-slow text reads
#     them (gputui.diagnose.slow.why.event_names);
#  2. the hard negatives one GPU can show stay silent in `gputui check --json`: two ranks
#     sharing the GPU, imbalanced and communication-only (no `slow`, no `stalled`); the
#     recordings are kept for test data;
#  3. the cost of the wait-share bookkeeping on this machine's CPU (bench/straggler_cost.py).
# Run through run_all.sh (PYTHONPATH, OUT):  bash scripts/device/run_all.sh TAG check_straggler
# PASS/FAIL lines in $OUT/straggler_summary.txt. About 2 minutes.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/straggler_summary.txt"
: >"$S"
. "$(dirname "$0")/common.sh"
JOB=
trap 'stop_group "$JOB"' EXIT

timeout 20 python3 -m gputui record --force "$O/str_idle.trace.jsonl.gz" --duration 5 \
  --interval 0.25 >/dev/null 2>"$O/str_idle_record.err"

for mode in imbalanced comm; do
  log="$O/str_${mode}_job.txt"
  setsid python3 scripts/device/straggler_worker.py "$mode" 40 >"$log" 2>&1 &
  JOB=$!
  for _ in $(seq 1 120); do  # at most 60 s for both ranks to be ready
    [ "$(grep -c '^READY' "$log")" -ge 2 ] && break
    sleep 0.5
  done
  timeout 45 python3 -m gputui record --force "$O/str_${mode}.trace.jsonl.gz" --duration 25 \
    --interval 0.25 >/dev/null 2>"$O/str_${mode}_record.err" &
  rec=$!
  timeout 45 python3 -m gputui check --json --duration 25 --interval 0.5 --fail-on-slow \
    >"$O/str_${mode}.jsonl" 2>"$O/str_${mode}.err"
  rc=$?
  wait "$rec"
  stop_group "$JOB"
  JOB=
  python3 - "$O/str_${mode}.jsonl" "$mode" "$rc" <<'PY' | tee -a "$S"
import json, sys
path, mode, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = [json.loads(x) for x in open(path) if x.strip()]
states = [d["state"] for d in lines]
ok = rc == 0 and lines and not set(states) - {"ok"}
print(f"{'PASS' if ok else 'FAIL'} {mode}: exit {rc}, states {states}, last: {lines[-1]['reason'] if lines else '-'}")
PY
done

python3 - "$O" <<'PY' | tee -a "$S"
import statistics, sys
from gputui.collect.trace.format import read_trace
from gputui.diagnose.slow.why import event_names
out = sys.argv[1]
for name in ("idle", "imbalanced", "comm"):
    try:
        snaps = read_trace(f"{out}/str_{name}.trace.jsonl.gz")
    except Exception as e:
        print(f"FAIL {name}: no recording ({e})")
        continue
    g = [s.gpu(0) for s in snaps if s.gpu(0) is not None]
    med = lambda xs: statistics.median(xs) if xs else None
    events = sorted({e for x in g for e in event_names(x.events)})
    print(
        f"READ {name}: {len(g)} samples, util {med([x.util for x in g if x.util is not None])}, "
        f"mem_util {med([x.mem_util for x in g if x.mem_util is not None])}, "
        f"power {med([x.power_w for x in g if x.power_w is not None])} W of "
        f"{g[0].power_limit_w if g else None}, SM {med([x.sm_mhz for x in g if x.sm_mhz is not None])} MHz, "
        f"clock event reasons seen: {events or 'none'}"
    )
PY
python3 bench/straggler_cost.py --updates 300 2>&1 | tee -a "$S"
