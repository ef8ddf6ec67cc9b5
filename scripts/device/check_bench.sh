#!/usr/bin/env bash
# Issue 6 on a GPU node: the benchmark figures that need real GPUs, in well under 5 minutes.
#   bash scripts/device/run_all.sh TAG check_bench
# 1. sampler cost per tick with 0/100/1000 real processes, and NVML reads per GPU vs the floor
# 2+3. gputui and nvitop side by side in tmux (160x50, 1 s refresh) for 60 s: CPU, peak RSS;
#      then each started alone 3 times for the time to the first frame with the GPU name
# 4+5. the 1000-row table and dump-all (CPU only, but this node's CPU is the one to quote)
# Results: $OUT/bench_*.json, $OUT/bench_*.txt, and $OUT/bench_summary.txt (one table).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="$OUT"
B="$O/bench"
mkdir -p "$B"
PY=python3
cd bench || exit 1
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$O/bench_gpus.txt"

echo "== sampler cost (0/100/1000 procs, NVML per GPU)"
timeout -k 5 100 $PY sampler_cost.py --procs 0 100 1000 --ticks 100 --nvml \
  --json "$B/sampler.json" 2>&1 | tee "$O/bench_sampler.txt"

echo "== gputui vs nvitop: 60 s together in tmux, then 3 first frames each"
# nvitop from the carried wheel (PYTHONPATH=/tmp/site); `python3 -m nvitop` avoids relying on
# the shebang of a --target install's script.
timeout -k 5 150 $PY app_cpu.py --apps gputui nvitop --runner tmux --size 160x50 \
  --interval 1 --duration 60 --warmup 3 --frames 3 --frame-timeout 20 \
  --nvitop "$PY -m nvitop" --gputui "$PY -m gputui" \
  --json "$B/app.json" 2>&1 | tee "$O/bench_app.txt"

echo "== 1000-row process table"
timeout -k 5 60 $PY table_apply.py --rows 1000 --repeat 3 \
  --json "$B/table.json" 2>&1 | tee "$O/bench_table.txt"

echo "== dump all ranks, 8 processes"
timeout -k 5 30 $PY dump_all.py --procs 8 --repeat 3 \
  --json "$B/dump.json" 2>&1 | tee "$O/bench_dump.txt"

echo "== summary"
timeout -k 5 20 $PY run.py --from-json "$B" 2>&1 | tee "$O/bench_summary.txt"
# nothing of ours may outlive the check: the tmux servers are private (-L gputui-bench-PID)
# and app_cpu.py kills them; sleeping children are reaped by sampler_cost.py.
