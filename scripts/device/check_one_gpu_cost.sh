#!/usr/bin/env bash
# Issues 12 and 13 on a machine with ONE GPU, busy: what gputui costs beside nvitop.
# A 1-rank training job (scripts/device/train_worker.py: bf16 matmuls + all_reduce) keeps GPU 0 busy
# throughout; meanwhile, one after the other:
#   1. bench/app_cpu.py --apps gputui nvitop floor, all three at once in 160x50 terminals,
#      with .pyc present (compiled first, as pip leaves an install), then with --no-pyc;
#   2. bench/exporter_cost.py --live beside nvitop-exporter, both scraped every second;
#   3. bench/first_frame.py: the first frame headless, live and --demo (5 starts each);
#   4. bench/sampler_cost.py --nvml: what one live sample costs on this GPU;
#   5. peak RSS of gputui as it is beside gputui with MALLOC_ARENA_MAX=2 (20 s, together):
#      whether the per-thread malloc arenas of the NVML threads are what raises it here.
# Run through run_all.sh (PYTHONPATH, OUT and the NCCL env):
#   LIMIT=480 bash scripts/device/run_all.sh oc check_one_gpu_cost
# Figures in $OUT/onegpu_cost.txt and the JSON files beside it. About 6 minutes.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/onegpu_cost.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
JOB=
. scripts/device/common.sh
stop_job() { stop_group "$JOB"; JOB=; }
trap stop_job EXIT
trap 'stop_job; exit 143' TERM INT

say "INFO $(nvidia-smi -L | head -1); $(nproc) cores"
log="$O/oc_train.txt"
busy_gpu "$log" 29631 330 || { say "FAIL the training job did not start"; exit 1; }
say "INFO busy: $(nvidia-smi --query-gpu=utilization.gpu,utilization.memory,power.draw,power.limit --format=csv,noheader)"

for pyc in present absent; do
  extra=()
  [ "$pyc" = absent ] && extra=(--no-pyc)
  (cd bench && timeout -k 5 170 python3 app_cpu.py --apps gputui nvitop floor --duration 60 \
    --frames 3 --frame-timeout 20 --interval 1 --size 160x50 --runner auto \
    --nvitop "python3 -m nvitop" --gputui "python3 -m gputui" "${extra[@]}" \
    --json "$O/oc_app_pyc_$pyc.json") >"$O/oc_app_pyc_$pyc.txt" 2>&1
  say "== app_cpu, .pyc $pyc: exit $?"
  tail -20 "$O/oc_app_pyc_$pyc.txt" | tee -a "$S"
done

# The first frame headless (Textual's run_test), timed where Textual composes it: the first
# sample on screen, then the frame with the detector's verdict (bench/first_frame.py).
(timeout -k 5 90 python3 bench/first_frame.py --modes live demo --starts 5 \
  --json "$O/oc_first_frame.json") >"$O/oc_first_frame.txt" 2>&1
say "== first_frame (headless, .pyc present): exit $?"
grep -v '^{' "$O/oc_first_frame.txt" | tail -4 | tee -a "$S"

(timeout -k 5 120 python3 bench/exporter_cost.py --live --duration 45 \
  --compare-cmd "python3 -m nvitop_exporter --bind-address 127.0.0.1 --port 9836 --interval 1" \
  --compare-url http://127.0.0.1:9836/metrics --compare-name "nvitop-exporter 1.7.2" \
  --json "$O/oc_exporter.json") >"$O/oc_exporter.txt" 2>&1
say "== exporter_cost --live: exit $?"
tail -15 "$O/oc_exporter.txt" | tee -a "$S"

(timeout -k 5 90 python3 bench/sampler_cost.py --nvml --procs 0 100 --ticks 100 \
  --json "$O/oc_sampler.json") >"$O/oc_sampler.txt" 2>&1
say "== sampler_cost --nvml: exit $?"
tail -20 "$O/oc_sampler.txt" | tee -a "$S"

(cd bench && timeout -k 5 60 python3 app_cpu.py --apps gputui \
  "gputui-arena2=env MALLOC_ARENA_MAX=2 python3 -m gputui" --duration 20 --frames 1 \
  --frame-timeout 20 --interval 1 --size 160x50 --runner auto --gputui "python3 -m gputui" \
  --json "$O/oc_arena.json") >"$O/oc_arena.txt" 2>&1
say "== app_cpu, MALLOC_ARENA_MAX=2 beside the default: exit $?"
tail -8 "$O/oc_arena.txt" | tee -a "$S"
say "INFO training job: $(grep -c . "$log") lines; $(tail -1 "$log")"
