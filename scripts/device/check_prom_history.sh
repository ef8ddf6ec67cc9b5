#!/usr/bin/env bash
# Issue 42 on a 4-GPU node: a real 4-rank NCCL hang, scraped the way dcgm-exporter would
# have served it, for `gputui check --prometheus` to read back.
#   bash scripts/device/run_all.sh ph check_prom_history                (about 2.5 min)
#   GPUTUI_DEVICE_DRYRUN=1 OUT=/tmp/ph bash scripts/device/check_prom_history.sh   (CPU: gloo, fake NVML)
#
# multi_worker.py runs 4 ranks (one per GPU, NCCL) healthy for 20 s, then rank 3 sleeps in
# load_next_batch_stuck() while ranks 0-2 wait inside all_reduce. prom_sampler.py samples
# NVML at 1 Hz for 90 s from READY and writes dcgm-exporter's series (DCGM_FI_DEV_GPU_UTIL
# {gpu,UUID,Hostname,modelName,pod,namespace,container} value timestamp ...) to
# $OUT/dcgm.om.gz, GPU r labelled pod hist-worker-r; the onset (the worker's ONSET line) goes
# to $OUT/prom_history_meta.json. Bring the file back and read it with
#   bash scripts/prom_readback.sh dcgm.om.gz
# expected: job lab/hist HUNG, onset within a second or two of the ONSET time, suspect
# GPU 3 (pod lab/hist-worker-3) idle with its process alive, GPUs 0-2 spinning.
# Where prometheus and promtool are installed on the node, the read-back runs here too.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
O="${OUT:?}"
mkdir -p "$O"
S="$O/prom_history_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
JOB=
. scripts/device/common.sh
cleanup() { stop_group "$JOB"; JOB=; }
trap cleanup EXIT
trap 'cleanup; exit 143' TERM INT

DRY="${GPUTUI_DEVICE_DRYRUN:-0}"
BACKEND=nccl
[ "$DRY" = 1 ] && BACKEND=gloo
[ "$DRY" = 1 ] || say "INFO $(nvidia-smi -L | tr '\n' ';')"

LOG="$O/prom_history_job.txt"
setsid python3 scripts/device/multi_worker.py --spawn 4 stuck 130 --onset 20 --odd 3 \
  --backend "$BACKEND" >"$LOG" 2>&1 &
JOB=$!
for _ in $(seq 1 120); do
  [ "$(grep -c '^READY' "$LOG")" -ge 4 ] && break
  kill -0 "$JOB" 2>/dev/null || break
  sleep 0.5
done
[ "$(grep -c '^READY' "$LOG")" -ge 4 ] || { say "FAIL job did not start"; tail -20 "$LOG" >>"$S"; exit 1; }
say "INFO job ready ($BACKEND); sampling 90 s at 1 Hz"
timeout 120 python3 scripts/device/prom_sampler.py "$O/dcgm.om.gz" 90 --onset 20 \
  --pod-prefix hist --namespace lab 2>"$O/prom_sampler.err" | tee -a "$S"
rc=${PIPESTATUS[0]}
cleanup
python3 - "$LOG" "$O/prom_history_meta.json" <<'PY' | tee -a "$S"
import json, re, sys
text = open(sys.argv[1], errors="replace").read()
m = re.search(r"^ONSET rank=(\d+) pid=(\d+).*? t=([\d.]+)", text, re.M)
meta = {"onset": float(m.group(3)) if m else None, "odd_rank": int(m.group(1)) if m else None}
json.dump(meta, open(sys.argv[2], "w"))
print(f"INFO onset {meta}")
PY
[ "$rc" = 0 ] && [ -s "$O/dcgm.om.gz" ] || { say "FAIL sampler exit $rc"; tail -5 "$O/prom_sampler.err" >>"$S"; exit 1; }
say "PASS wrote $O/dcgm.om.gz ($(stat -c %s "$O/dcgm.om.gz") bytes)"
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
  timeout 200 bash scripts/prom_readback.sh "$O/dcgm.om.gz" --json >"$O/prom_readback.jsonl" 2>"$O/prom_readback.err"
  say "INFO read back here: exit $? ($(tail -1 "$O/prom_readback.jsonl" | cut -c1-300))"
else
  say "INFO no prometheus/promtool on this node: read it back with scripts/prom_readback.sh"
fi
say "INFO done"
