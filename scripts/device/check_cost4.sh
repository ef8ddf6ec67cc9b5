#!/usr/bin/env bash
# Issue 31 item 2 on a 4-GPU node: gputui's cost beside nvitop, idle and busy.
#   LIMIT=260 bash scripts/device/run_all.sh cost check_cost4
#
# bench/app_cpu.py --apps gputui nvitop floor: together for 30 s (CPU, peak RSS), then 3 starts
# of each alone (first frame), 160x50, both apps with .pyc (as pip leaves them); idle GPUs,
# then all 4 busy (rank_worker.py, balanced) while short-lived processes come and go; then a
# py-spy record of the dashboard on the busy node: where its CPU goes.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
O="${OUT:?}"
S="$O/cost4_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
JOB= CHURN=
. scripts/device/common.sh
stop_job() { stop_group "$JOB"; JOB=; }
cleanup() { stop_job; [ -n "$CHURN" ] && kill "$CHURN" 2>/dev/null; tmux kill-server 2>/dev/null; }
trap cleanup EXIT
trap 'cleanup; exit 143' TERM INT

say "INFO $(nvidia-smi -L | tr '\n' ';'); $(nproc) cores; driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
nvidia-smi topo -m >"$O/n4_topo.txt" 2>&1
pynvml_dir=$(python3 -c 'import os, pynvml; print(os.path.dirname(pynvml.__file__))')
python3 -m compileall -q -j 0 /tmp/site "$PWD/gputui" "$pynvml_dir" >/dev/null 2>&1

start_job() {  # LOG ARGS...: rank_worker.py, 4 ranks; returns once all are READY
  local log=$1; shift
  setsid python3 scripts/device/rank_worker.py --world 4 "$@" >"$log" 2>&1 &
  JOB=$!
  for _ in $(seq 1 120); do
    [ "$(grep -c '^READY' "$log")" -ge 4 ] && return 0
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.5
  done
  say "FAIL job did not start: $(tail -3 "$log" | tr '\n' ' ')"
  return 1
}

app_cost() {  # TAG: app_cpu.py together 30 s + 3 starts alone
  (cd bench && timeout -k 5 150 python3 app_cpu.py --apps gputui nvitop floor --duration 30 \
    --frames 3 --frame-timeout 20 --interval 1 --size 160x50 --runner auto \
    --nvitop "python3 -m nvitop" --gputui "python3 -m gputui" --json "$O/n4_cost_$1.json") \
    >"$O/n4_cost_$1.txt" 2>&1
  say "== cost $1: exit $?"
  tail -12 "$O/n4_cost_$1.txt" | tee -a "$S"
}

# ---------------------------------------------------------------- 1. cost
app_cost idle
start_job "$O/n4_busy_job.txt" --seconds 240 || exit 1
(while :; do for _ in 1 2 3 4 5; do sleep 0.$((RANDOM % 9 + 1)) & done; sleep 0.5; done) &
CHURN=$!
say "INFO busy: $(nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,power.draw --format=csv,noheader | tr '\n' ';')"
app_cost busy
tmux new-session -d -s prof -x 160 -y 50 "python3 -m gputui"
sleep 3
pid=$(pgrep -f '^python3 -m gputui$' | head -1)
if [ -n "$pid" ]; then
  py-spy dump -p "$pid" --nonblocking 2>/dev/null | grep '^Thread' >"$O/n4_threads.txt"
  ticks() { for t in /proc/"$pid"/task/*; do echo "${t##*/} $(cut -d' ' -f14,15 "$t/stat")"; done; }
  ticks >"$O/n4_ticks0.txt"
  timeout -k 5 30 py-spy record -p "$pid" -d 20 -r 100 -f raw -o "$O/n4_prof.txt" --nonblocking \
    >/dev/null 2>&1
  ticks >"$O/n4_ticks1.txt"
  say "== the dashboard's CPU ticks per thread over those 20 s (py-spy's own pauses included)"
  python3 - "$O/n4_threads.txt" "$O/n4_ticks0.txt" "$O/n4_ticks1.txt" <<'PY' | tee -a "$S"
import re, sys
names = {m[1]: m[2] for m in re.finditer(r"Thread (\d+) \([^)]*\): \"([^\"]*)\"", open(sys.argv[1]).read())}
def read(path):
    return {f[0]: int(f[1]) + int(f[2]) for f in (ln.split() for ln in open(path)) if len(f) == 3}
a, b = read(sys.argv[2]), read(sys.argv[3])
rows = sorted(((b[t] - a.get(t, 0), names.get(t, t)) for t in b), reverse=True)
print(f"total {sum(d for d, _ in rows)} ticks: " + ", ".join(f"{n} {d}" for d, n in rows if d))
PY
  say "== py-spy of the dashboard on 4 busy GPUs, 20 s: top own frames"
  python3 - "$O/n4_prof.txt" <<'PY' | tee -a "$S"
import collections, sys
own, tot = collections.Counter(), 0
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    tot += int(n); own[stack.split(";")[-1][:110]] += int(n)
print("samples", tot)
for k, v in own.most_common(10): print(f"{v:6d}  {k}")
PY
fi
tmux kill-server 2>/dev/null
kill "$CHURN" 2>/dev/null; CHURN=
stop_job

say "INFO done"
