#!/usr/bin/env bash
# Issue 2 on a GPU node: gputui live against a running 2-rank torchrun job; snapshot vs
# nvidia-smi; record a trace and replay it; a headless frame of the real app.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="$OUT"
setsid python3 -m torch.distributed.run --nproc-per-node 2 --master-port 29611 \
  scripts/device/train_worker.py 60 >"$O/dash_job.txt" 2>&1 &
JOB=$!
trap 'kill -TERM -- -$JOB 2>/dev/null; sleep 1; kill -KILL -- -$JOB 2>/dev/null' EXIT
for _ in $(seq 1 120); do
  [ "$(grep -o 'READY' "$O/dash_job.txt" | wc -l)" -ge 2 ] && break
  sleep 0.5
done
grep READY "$O/dash_job.txt" || { echo "dash: job did not get ready"; tail -20 "$O/dash_job.txt"; }
sleep 2
python3 -m gputui snapshot --json >"$O/dash_snapshot.json"
nvidia-smi --query-gpu=index,name,utilization.gpu,utilization.memory,power.draw,power.limit,memory.used,memory.total,temperature.gpu,clocks.sm \
  --format=csv,noheader,nounits >"$O/dash_smi.csv"
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits >"$O/dash_smi_apps.csv"
python3 scripts/device/compare_smi.py "$O/dash_snapshot.json" "$O/dash_smi.csv" "$O/dash_smi_apps.csv" | tee "$O/dash_compare.txt"
python3 -m gputui snapshot | tee "$O/dash_snapshot.txt"
python3 -m gputui record "$O/dash_record.jsonl.gz" --duration 6 --interval 0.5
python3 -m gputui snapshot --replay "$O/dash_record.jsonl.gz" | head -5
python3 scripts/device/app_frame.py "$O/dash_app.svg" 4 | tee "$O/dash_app.txt"
# The real app in a real terminal, as a person would run it over ssh.
tmux kill-server 2>/dev/null
tmux new-session -d -s gputui -x 160 -y 48 "env PYTHONPATH=$PYTHONPATH PATH=$PATH python3 -m gputui"
sleep 5
tmux capture-pane -p -t gputui >"$O/dash_tmux.txt"
tmux send-keys -t gputui q
sleep 2
tmux has-session -t gputui 2>/dev/null && echo "tmux: gputui still running after q" || echo "tmux: gputui quit on q"
head -30 "$O/dash_tmux.txt"
