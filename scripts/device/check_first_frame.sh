#!/usr/bin/env bash
# Issue 22 part 7 on a busy GPU: gputui beside nvitop (both with .pyc), and where the rest goes.
# A 1-rank training job (train_worker.py) keeps GPU 0 busy; meanwhile:
#   1. bench/app_cpu.py --apps gputui nvitop floor: together for 45 s (CPU, peak RSS), then
#      5 starts of each alone (first frame with data), 160x50;
#   2. full_frame.py: first frame and full dashboard of gputui, 5 starts, 160x50 and 80x24;
#   3. peak RSS of the parts: bare Python, + pynvml with nvmlInit and one read of every field
#      gputui reads, + Textual's import, the three together;
#   4. py-spy record of the running dashboard for 30 s: where its CPU goes.
#   LIMIT=300 bash scripts/device/run_all.sh ff check_first_frame
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/first_frame.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
JOB=
. scripts/device/common.sh
stop_job() { stop_group "$JOB"; JOB=; tmux kill-server 2>/dev/null; }
trap stop_job EXIT
trap 'stop_job; exit 143' TERM INT

say "INFO $(nvidia-smi -L | head -1); $(nproc) cores"
log="$O/ff_train.txt"
busy_gpu "$log" 29641 250 || { say "FAIL the training job did not start"; exit 1; }
say "INFO busy: $(nvidia-smi --query-gpu=utilization.gpu,utilization.memory,power.draw,power.limit --format=csv,noheader)"

(cd bench && timeout -k 5 110 python3 app_cpu.py --apps gputui nvitop floor --duration 45 \
  --frames 5 --frame-timeout 20 --interval 1 --size 160x50 --runner auto \
  --nvitop "python3 -m nvitop" --gputui "python3 -m gputui" \
  --json "$O/ff_app.json") >"$O/ff_app.txt" 2>&1
say "== app_cpu (.pyc present, together 45 s, then 5 starts alone): exit $?"
tail -14 "$O/ff_app.txt" | tee -a "$S"

for size in 160x50 80x24; do
  timeout -k 5 60 python3 scripts/device/full_frame.py --starts 5 --size "$size" -- \
    python3 -m gputui >"$O/ff_full_$size.txt" 2>&1
  say "== full_frame $size: exit $? $(tail -1 "$O/ff_full_$size.txt")"
done
timeout -k 5 60 python3 scripts/device/full_frame.py --starts 5 --full 'GPU' -- \
  python3 -m nvitop >"$O/ff_full_nvitop.txt" 2>&1
say "== full_frame nvitop: exit $? $(tail -1 "$O/ff_full_nvitop.txt")"

hwm='print(open("/proc/self/status").read().split("VmHWM:")[1].split()[0], "kB")'
nv='import pynvml as n; n.nvmlInit(); h=n.nvmlDeviceGetHandleByIndex(0)
for f in (n.nvmlDeviceGetUtilizationRates, n.nvmlDeviceGetPowerUsage, n.nvmlDeviceGetMemoryInfo, n.nvmlDeviceGetTemperature, n.nvmlDeviceGetComputeRunningProcesses):
    try: f(h) if f is not n.nvmlDeviceGetTemperature else f(h, 0)
    except Exception: pass'
say "== peak RSS of the parts"
say "bare python: $(python3 -c "$hwm")"
say "pynvml + nvmlInit + reads: $(python3 -c "$nv
$hwm")"
say "textual.app import: $(python3 -c "import textual.app
$hwm")"
say "psutil + pynvml reads + textual.app: $(python3 -c "import psutil
$nv
import textual.app
$hwm")"
say "nvitop's modules + reads: $(python3 -c "import nvitop.tui, nvitop.api
$nv
$hwm")"

tmux new-session -d -s prof -x 160 -y 50 "python3 -m gputui"
sleep 4
pid=$(pgrep -f '^python3 -m gputui' | head -1)
if [ -n "$pid" ]; then
  timeout -k 5 45 py-spy record -p "$pid" -d 30 -r 200 -f raw -o "$O/ff_prof.txt" --nonblocking \
    >/dev/null 2>&1
  say "== py-spy record of the dashboard, 30 s: exit $?; top own frames:"
  python3 - "$O/ff_prof.txt" <<'PY' | tee -a "$S"
import collections, sys
own, incl, tot = collections.Counter(), collections.Counter(), 0
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    n = int(n); tot += n
    frames = stack.split(";")
    own[frames[-1][:110]] += n
    for f in set(frames):
        if "gputui/" in f or "textual/" in f:
            incl[f[:110]] += n
print("samples", tot)
for k, v in own.most_common(15): print(f"{v:6d} own  {k}")
for k, v in incl.most_common(25): print(f"{v:6d} incl {k}")
PY
  say "gputui after 34 s: $(ps -o rss=,time= -p "$pid") VmHWM $(grep VmHWM /proc/$pid/status)"
fi
say "INFO training job: $(tail -1 "$log")"
