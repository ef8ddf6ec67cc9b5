#!/usr/bin/env bash
# The clocks pane (`C`, gputui/ui/screens/clocks.py) on 4 busy GPUs, against nvidia-smi.
# A 4-rank NCCL job (scripts/device/multi_worker.py heavy: back-to-back all_reduce, one rank
# per GPU) runs while scripts/device/clocks_pane.py drives the dashboard headless at 80x24:
# it presses C and, over 5 new samples, reads each GPU's SM clock and clock event reasons off
# the pane, beside nvidia-smi's clocks.sm and clocks_event_reasons.active at the same time.
# One PASS line per GPU: a row in every poll, and in one poll at least the same SM clock
# (within 10%) and the same reasons as nvidia-smi. Results: $OUT/clocks_*.
#   bash scripts/device/run_all.sh clk check_clocks                      # ~1 min
# Dry run on a CPU box (gloo ranks, the demo recording instead of NVML, no nvidia-smi):
#   GPUTUI_DEVICE_DRYRUN=1 OUT=/tmp/clk bash scripts/device/check_clocks.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
O="${OUT:?set OUT to the output directory}"
mkdir -p "$O"
S="$O/clocks_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
PY=${PY:-python3}
if [ "${GPUTUI_DEVICE_DRYRUN:-0}" = 1 ]; then
  N=4 BACKEND=gloo DRY=(--dry)
else
  N=$(nvidia-smi -L | wc -l); [ "$N" -gt 4 ] && N=4  # one rank per GPU, up to 4
  BACKEND=nccl DRY=()
  say "INFO $(nvidia-smi -L | head -1); $(nvidia-smi -L | wc -l) GPUs"
fi

JOB=
. scripts/device/common.sh
stop_job() { stop_group "$JOB"; JOB=; }
trap stop_job EXIT
trap 'stop_job; exit 143' TERM INT

log="$O/clocks_job.txt"
setsid "$PY" scripts/device/multi_worker.py --spawn "$N" heavy 150 --backend "$BACKEND" >"$log" 2>&1 &
JOB=$!
for _ in $(seq 1 180); do  # at most 90 s for every rank to be ready
  [ "$(grep -c '^READY rank=' "$log")" -ge "$N" ] && break
  kill -0 "$JOB" 2>/dev/null || break
  sleep 0.5
done
ready=$(grep -c '^READY rank=' "$log")
if [ "$ready" -lt "$N" ]; then
  say "FAIL the job did not start ($ready/$N ranks)"
  tail -20 "$log" | tee -a "$S"
  exit 1
fi
say "INFO the job runs: $N ranks, $BACKEND"

timeout -k 5 120 "$PY" scripts/device/clocks_pane.py --out "$O" --polls 5 "${DRY[@]}" \
  >"$O/clocks_pane.log" 2>&1
rc=$?
grep -E '^(PASS|FAIL)' "$O/clocks_pane.log" | tee -a "$S"
[ "$rc" = 0 ] || tail -20 "$O/clocks_pane.log" | tee -a "$S"
say "== clocks pane: exit $rc"
exit "$rc"
