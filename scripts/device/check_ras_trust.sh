#!/usr/bin/env bash
# Issue 43 (H1) on GPUs: NCCL RAS's own listener is trusted, a fake one of another user is not.
# A real 4-rank NCCL job (scripts/device/multi_worker.py, rank 3 asleep in load_next_batch_stuck)
# twice:
#   own    NCCL's RAS thread listens on 127.0.0.1:28028: gputui's query must be "done" and
#          name as its listener (uid, pid) one of the job's rank processes
#   fake   a process run as nobody (uid 65534) listens first on the job's NCCL_RAS_ADDR and
#          answers as RAS would: every query must be "untrusted", naming uid 65534
# gputui asks as the Watcher does (gputui.tools.gather.nccl.ras_query with the job's ranks).
#   LIMIT=240 bash scripts/device/run_all.sh ras check_ras_trust
# PASS/FAIL lines in $OUT/ras_trust_summary.txt. About 2 minutes.
# GPUTUI_DEVICE_DRYRUN=1: gloo ranks on the CPU (no NCCL, so no RAS: `own` is INFO, `fake` runs).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/ras_trust_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
. scripts/device/common.sh
JOB= FAKE=
trap 'stop_group "$JOB"; [ -n "$FAKE" ] && kill "$FAKE" 2>/dev/null' EXIT
trap 'stop_group "$JOB"; exit 143' TERM INT
backend=nccl
if [ "${GPUTUI_DEVICE_DRYRUN:-0}" = 1 ]; then backend=gloo; else say "INFO $(nvidia-smi -L | head -1)"; fi

for case in own fake; do
  unset NCCL_RAS_ADDR
  FAKE=
  if [ "$case" = fake ]; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # the fake: answers any query with RAS's JSON naming pid 1 behind (as nobody, via setpriv)
    setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import socket, sys
srv = socket.create_server(("127.0.0.1", int(sys.argv[1])))
ans = open(sys.argv[2], "rb").read()
while True:
    c, _ = srv.accept(); c.recv(4096); c.sendall(ans); c.close()
' "$port" tests/data/ras/behind-4rank.json >"$O/ras_fake.txt" 2>&1 &
    FAKE=$!
    export NCCL_RAS_ADDR="127.0.0.1:$port"
  fi
  log="$O/ras_${case}_job.txt"
  setsid python3 scripts/device/multi_worker.py --spawn 4 stuck 90 --odd 3 --onset 4 \
    --backend "$backend" >"$log" 2>&1 &
  JOB=$!
  for _ in $(seq 1 180); do  # at most 90 s for the four ranks
    [ "$(grep -c '^READY rank=' "$log")" -ge 4 ] && break
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.5
  done
  if [ "$(grep -c '^READY rank=' "$log")" -lt 4 ]; then
    say "FAIL $case: the job did not start"; tail -15 "$log" | tee -a "$S"
    stop_group "$JOB"; continue
  fi
  sleep 8  # past the onset: rank 3 asleep, the others in all_reduce
  timeout 60 python3 - "$log" "$case" "$backend" <<'PY' | tee -a "$S"
import re, sys, threading
import psutil
from gputui.collect.model import ProcessInfo, RankInfo
from gputui.tools.gather.nccl import ras_query
log, case, backend = sys.argv[1:4]
pids = [int(p) for p in re.findall(r"^READY rank=\d+ pid=(\d+)", open(log).read(), re.M)]
ranks = [ProcessInfo(pid=p, create_time=psutil.Process(p).create_time(), gpus=(i,),
                     rank=RankInfo(rank=i, world_size=4)) for i, p in enumerate(pids)]
env = psutil.Process(pids[0]).environ()
q = ras_query(env, threading.Event(), ranks)
print(f"  {case}: outcome {q['outcome']}, listener {q.get('listener')}, error {q['error']}")
listener_pid = int(q["listener"].rsplit("pid ", 1)[1]) if "pid " in (q.get("listener") or "") else None
if case == "own":
    if backend == "gloo":
        print(f"INFO own: gloo has no RAS ({q['outcome']})")
    else:
        ok = q["outcome"] == "done" and listener_pid in pids
        print(f"{'PASS' if ok else 'FAIL'} own: NCCL's RAS answered, its listener a rank ({listener_pid})")
else:
    ok = q["outcome"] == "untrusted" and "uid 65534" in (q["error"] or "") and q["answer"] is None
    print(f"{'PASS' if ok else 'FAIL'} fake: the listener of uid 65534 is not evidence")
PY
  stop_group "$JOB"
  [ -n "$FAKE" ] && kill "$FAKE" 2>/dev/null
  JOB=
done
