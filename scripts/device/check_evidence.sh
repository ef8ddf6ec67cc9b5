#!/usr/bin/env bash
# Issue 19 on a machine with ONE GPU: how soon the strongest evidence becomes the headline.
# A real 2-rank NCCL job whose ranks share GPU 0 (scripts/device/multi_worker.py --share-gpu, as in
# check_one_gpu_hang.sh), four cases:
#   mismatch-fr   rank 1 in broadcast, rank 0 in all_reduce, the flight recorder's pipe on
#   mismatch      the same without the flight recorder
#   stuck         rank 1 asleep in load_next_batch_stuck() (a CPU-stuck rank)
#   bench         an NCCL-only all_reduce loop (--comm-only, no matmuls): busy, not a hang
# For each, `gputui check --json` runs from before the onset; each line is stamped with its
# arrival time. Reported: the time from the onset to the first line whose `reason` (the
# headline) says the answer (both collectives / the culprit's line), and for the benchmark
# that no line is stalled or hung unless RAS then says "busy". Run through run_all.sh:
#   LIMIT=240 bash scripts/device/run_all.sh ev check_evidence
# PASS/FAIL lines in $OUT/evidence_summary.txt. About 3.5 minutes.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1
O="${OUT:?}"
S="$O/evidence_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
. scripts/device/common.sh
JOB=
trap 'stop_group "$JOB"' EXIT
trap 'stop_group "$JOB"; exit 143' TERM INT
say "INFO $(nvidia-smi -L | head -1)"


for case in mismatch-fr mismatch stuck bench; do
  mode=${case%-fr}
  extra=()
  unset TORCH_NCCL_DEBUG_INFO_PIPE_FILE TORCH_NCCL_DEBUG_INFO_TEMP_FILE
  if [ "$case" = mismatch-fr ]; then
    export TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/gputui_frpipe_
    export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/gputui_frdump_
  fi
  [ "$case" = bench ] && mode=heavy extra=(--comm-only --size 65536)
  rm -f /tmp/gputui_frpipe_* /tmp/gputui_frdump_*
  log="$O/ev_${case}_job.txt"
  setsid python3 scripts/device/multi_worker.py --spawn 2 "$mode" 70 --odd 1 --onset 6 --share-gpu \
    "${extra[@]}" >"$log" 2>&1 &
  JOB=$!
  for _ in $(seq 1 120); do  # at most 60 s for both ranks
    [ "$(grep -c '^READY rank=' "$log")" -ge 2 ] && break
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.5
  done
  if [ "$(grep -c '^READY rank=' "$log")" -lt 2 ]; then
    say "FAIL $case: the job did not start"
    tail -15 "$log" | tee -a "$S"
    stop_group "$JOB"
    continue
  fi
  ready=$(python3 -c 'import time; print(time.time())')
  (timeout 80 python3 -m gputui check --json --duration 30 --interval 0.5 \
    2>"$O/ev_${case}.err"; echo "{\"_exit\": $?}") | stamp >"$O/ev_${case}.jsonl"
  python3 - "$O/ev_${case}.jsonl" "$log" "$case" "$ready" <<'PY' | tee -a "$S"
import json, re, sys
path, log, case, ready = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
lines = [json.loads(x) for x in open(path) if x.strip()]
rc = next((d["_exit"] for d in lines if "_exit" in d), None)
lines = [d for d in lines if "_exit" not in d]
m = re.search(r"^ONSET rank=\d+ pid=\d+ step=\d+ t=([\d.]+)", open(log).read(), re.M)
onset = float(m.group(1)) if m else ready  # the benchmark has no onset: its start
for d in lines:
    top = (d.get("ranked") or [{}])[0]
    print(f"  {d['_arrived'] - onset:+6.1f}s {d['state']:8s} [{top.get('strength')}] "
          f"{d['reason'][:200]}")
if case.startswith("mismatch"):
    hit = next((d for d in lines if d["reason"].startswith("ranks in different collectives")
                and "broadcast" in d["reason"].lower()), None)
    want = "a mismatch headline naming broadcast"
elif case == "stuck":
    hit = next((d for d in lines if "load_next_batch_stuck" in d["reason"]), None)
    want = "the culprit's line as headline"
else:
    alarms = [d for d in lines if d["state"] in ("stalled", "hung")]
    busy = [d for d in lines if d["reason"].startswith("busy")]
    ok = not alarms or (bool(busy) and lines[-1]["state"] == "ok")
    print(f"{'PASS' if ok else 'FAIL'} bench: check exit {rc}; {len(alarms)} alarm line(s), "
          f"{len(busy)} busy line(s)")
    sys.exit()
took = hit["_arrived"] - onset if hit else None
ok = hit is not None and took <= 15.0
said = f"{want} at onset {took:+.1f} s" if hit else f"no line with {want}"
print(f"{'PASS' if ok else 'FAIL'} {case}: check exit {rc}; {said} (target 15 s)")
if hit:
    print(f"  culprit_frame={hit.get('culprit_frame')}; next step: {hit['next_steps'][0][:160]}")
    print("  ranked: " + "; ".join(f"{f['strength']}/{f['source']}" for f in hit.get("ranked", [])))
PY
  head -3 "$O/ev_${case}.err" | tee -a "$S"
  stop_group "$JOB"
  JOB=
done
