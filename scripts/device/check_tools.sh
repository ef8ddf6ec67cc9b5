#!/usr/bin/env bash
# Issue 4 on a 2 x H200 node: the attach tools against a real hung NCCL job.
# A 2-rank torchrun job where rank 1 sleeps in wait_for_the_data_loader() while rank 0
# spins in all_reduce/synchronize. Then, timed: gputui dump --job (py-spy on all ranks,
# grouped), dump --native, dump --gdb (cuda-gdb: this node has no gdb), a dump of the stuck
# rank, and gputui bundle. Outputs land in $OUT/tools_*; a summary is printed at the end.
# Everything is bounded (timeout per step, 3 minutes in all); the job is killed on exit.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?set OUT to the output directory}"
mkdir -p "$O"
[ -d /tmp/site/bin ] && export PATH="$PATH:/tmp/site/bin"  # py-spy from the carried wheels
START=$(date +%s.%N)
SUMMARY="$O/tools_summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }
left() { python3 -c "import sys, time; print(max(5, int(220 - (time.time() - float(sys.argv[1])))))" "$START"; }

python3 -c "import gputui, psutil, torch" 2>"$O/tools_import.err" \
  || { say "tools: gputui/psutil/torch not importable: $(tail -1 "$O/tools_import.err")"; exit 1; }
{
  echo "PATH=$PATH"
  python3 -c "from gputui.tools.which import available_tools; print(available_tools())"
  python3 -c "from gputui.tools.which import native_debugger; print('native debugger', native_debugger())"
  python3 -c "from gputui.tools.attach import ptrace; print('ptrace_scope', ptrace.ptrace_scope(), 'cap_sys_ptrace', ptrace.has_cap_sys_ptrace())"
  id
} >"$O/tools_which.txt" 2>&1
say "tools: $(sed -n 2p "$O/tools_which.txt")"

PORT=$((29700 + RANDOM % 200))
setsid python3 -m torch.distributed.run --nproc-per-node 2 --master-port "$PORT" \
  scripts/device/tools_worker.py 230 1 >"$O/tools_job.txt" 2>&1 &
JOB=$!
cleanup() {
  kill -TERM -- -"$JOB" 2>/dev/null
  sleep 1
  kill -KILL -- -"$JOB" 2>/dev/null
}
trap cleanup EXIT

# Wait (bounded) for both ranks to say READY.
for _ in $(seq 1 180); do
  [ "$(grep -o 'READY rank=[0-9]* pid=[0-9]*' "$O/tools_job.txt" | wc -l)" -ge 2 ] && break
  kill -0 "$JOB" 2>/dev/null || break
  sleep 0.5
done
PID0=$(grep -o 'READY rank=0 pid=[0-9]*' "$O/tools_job.txt" | head -1 | sed 's/.*pid=//')
PID1=$(grep -o 'READY rank=1 pid=[0-9]*' "$O/tools_job.txt" | head -1 | sed 's/.*pid=//')
if [ -z "$PID0" ] || [ -z "$PID1" ]; then
  say "tools: the job did not get ready"
  tail -30 "$O/tools_job.txt" | tee -a "$SUMMARY"
  exit 1
fi
say "tools: job ready after $(secs "$START" "$(date +%s.%N)") s: rank0 pid $PID0, rank1 pid $PID1"

# Rank 0 printed READY just before entering all_reduce: wait until py-spy sees it inside.
for _ in $(seq 1 40); do
  python3 -m gputui dump "$PID0" 2>/dev/null | grep -q -e synchronize -e all_reduce && break
  sleep 0.25
done

# step NAME OUTFILE -- command...: run it bounded, time it, keep stdout/stderr.
step() {
  local name=$1 out=$2
  shift 3
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout "$(left)" "$@" >"$O/$out" 2>"$O/${out%.*}.err"
  rc=$?
  t1=$(date +%s.%N)
  say "tools: $name: exit $rc in $(secs "$t0" "$t1") s -> $out"
}

step "dump --job (py-spy, all ranks)" tools_dump_job.json -- python3 -m gputui dump --job "$PID0" --json
step "dump --job text" tools_dump_job.txt -- python3 -m gputui dump --job "$PID1"
step "dump rank0 (py-spy)" tools_dump_rank0.txt -- python3 -m gputui dump "$PID0"
step "dump rank1 (py-spy)" tools_dump_rank1.txt -- python3 -m gputui dump "$PID1"
step "dump rank0 --native" tools_dump_native.txt -- python3 -m gputui dump "$PID0" --native
step "dump rank0 --gdb (cuda-gdb)" tools_dump_gdb.txt -- python3 -m gputui dump "$PID0" --gdb
step "dump both --json" tools_dump_both.json -- python3 -m gputui dump "$PID0" "$PID1" --json
rm -rf "$O/bundle"
step "bundle" tools_bundle.txt -- python3 -m gputui bundle --out "$O/bundle" --seconds 3

# The app in a real terminal on the hung job: wait for the alert, j selects the suspect,
# p dumps its stack, a dumps all ranks. Each screen is captured.
tmux kill-server 2>/dev/null
tmux new-session -d -s gt -x 170 -y 50 "env PYTHONPATH=$PYTHONPATH PATH=$PATH python3 -m gputui"
cap() { sleep "$1"; tmux capture-pane -p -t gt >"$O/tools_tmux_$2.txt"; }
cap 14 alert
tmux send-keys -t gt j; sleep 1; tmux send-keys -t gt p; cap 4 py_spy
tmux send-keys -t gt Escape; sleep 1; tmux send-keys -t gt a; cap 5 dump_all
tmux send-keys -t gt Escape; sleep 1; tmux send-keys -t gt g; cap 20 gdb
tmux send-keys -t gt Escape; sleep 1; tmux send-keys -t gt q; sleep 2
tmux kill-server 2>/dev/null
say "tools: tmux screens captured: $(ls "$O"/tools_tmux_*.txt | wc -l)"

# What came out.
{
  echo "--- groups (dump --job):"
  python3 - "$O/tools_dump_job.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("  no JSON:", e); sys.exit()
print("  job:", d["job"]["how"])
for g in d["groups"]:
    print("  ", g["header"], "ODD" if g["odd"] else "", "|", " <- ".join(g["stack"][:3]))
for r in d["results"]:
    print("   rank", r["rank"], r["outcome"], f'{r["elapsed_s"]} s', r["target_state_after"])
PY
  echo "--- native frames of rank 0:"
  grep -m3 -e cuCtxSynchronize -e synchronize -e all_reduce "$O/tools_dump_native.txt" | sed 's/^/  /'
  echo "--- cuda-gdb:"
  grep -m1 -o 'ncclDevFunc[A-Za-z_0-9]*' "$O/tools_dump_gdb.txt" | sed 's/^/  GPU kernel: /'
  echo "  threads: $(grep -c '^Thread ' "$O/tools_dump_gdb.txt")"
  grep -m3 -o -e pt_nccl_watchdg -e pt_nccl_heartbt -e cuda-EvtHandlr "$O/tools_dump_gdb.txt" | sed 's/^/  /'
  tail -2 "$O/tools_dump_gdb.err" | sed 's/^/  stderr: /'
  echo "--- bundle:"
  cat "$O/tools_bundle.txt"
  (cd "$O/bundle" 2>/dev/null && find . -type f | sort | sed 's/^/  /')
  python3 - "$O/bundle/processes.json" <<'PY'
import json, sys
try:
    for p in json.load(open(sys.argv[1])):
        libs = {k: v.get("version") for k, v in p.get("libraries", {}).items()}
        print("  pid", p["pid"], "rank", p.get("rank"), libs)
except Exception as e:
    print("  no processes.json:", e)
PY
  echo "--- state of the ranks after every attach (must not be T/t):"
  for p in "$PID0" "$PID1"; do
    echo "  pid $p: $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || echo gone)"
  done
} 2>&1 | tee -a "$SUMMARY"
say "tools: total $(secs "$START" "$(date +%s.%N)") s"
