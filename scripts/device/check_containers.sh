#!/usr/bin/env bash
# Containers on a machine with ONE GPU: a 2-rank NCCL job (ranks share GPU 0 through
# NCCL_HOSTID, scripts/device/multi_worker.py --share-gpu) inside a new PID and mount namespace
# (`unshare --pid --mount --fork --mount-proc`), rank 1 stuck on the CPU; a CUDA process
# holding ~1.5 GiB OUTSIDE the namespace. Then:
#   inside   `gputui check --json` and `snapshot --json` run inside the namespace: the
#            verdict names the ranks by their in-namespace pids, GPU 0 shows the outside
#            process's memory as held outside this container
#   outside  the same from the host namespace: host pids
# Run through run_all.sh:  LIMIT=150 bash scripts/device/run_all.sh ct check_containers
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/containers_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
. scripts/device/common.sh

HOLD= NS=
cleanup() {
  [ -n "$HOLD" ] && kill "$HOLD" 2>/dev/null
  [ -n "$NS" ] && kill -TERM "$NS" 2>/dev/null && sleep 1 && kill -KILL "$NS" 2>/dev/null
  pkill -f multi_worker.py 2>/dev/null
}
trap cleanup EXIT

say "INFO $(nvidia-smi -L | head -1)"
# A CUDA process outside: 1.5 GiB held, no kernel.
python3 -c "
import torch, sys, time
x = torch.empty(1536 << 20, dtype=torch.uint8, device='cuda')
print('HOLD', flush=True)
time.sleep(600)
" >"$O/outside_hold.log" 2>&1 &
HOLD=$!
for _ in $(seq 1 60); do grep -q HOLD "$O/outside_hold.log" && break; sleep 0.5; done

# Inside: the job and, 22 s after the onset, gputui check/snapshot, all in the namespace.
cat >/tmp/inside.sh <<'SH'
set -u
cd "$1"; O=$2
python3 scripts/device/multi_worker.py --spawn 2 --share-gpu stuck 120 --odd 1 --onset 3 >"$O/inside_job.log" 2>&1 &
for _ in $(seq 1 120); do grep -q ONSET "$O/inside_job.log" && break; sleep 0.5; done
echo "inside: ps" >"$O/inside_ps.txt"; ps -eo pid,cmd >>"$O/inside_ps.txt"
timeout 60 python3 -m gputui check --json --duration 25 >"$O/inside_check.jsonl" 2>"$O/inside_check.err"
echo "check rc=$?" >>"$O/inside_check.err"
timeout 30 python3 -m gputui snapshot --json >"$O/inside_snapshot.json" 2>&1
sleep 600
SH
unshare --pid --mount --fork --mount-proc bash /tmp/inside.sh "$PWD" "$O" &
NS=$!
for _ in $(seq 1 200); do [ -s "$O/inside_snapshot.json" ] && break; sleep 0.5; done
# Outside, while the job is still stuck.
timeout 60 python3 -m gputui check --json --duration 15 >"$O/outside_check.jsonl" 2>"$O/outside_check.err"
echo "check rc=$?" >>"$O/outside_check.err"
timeout 30 python3 -m gputui snapshot --json >"$O/outside_snapshot.json" 2>&1

python3 - "$O" <<'PY' | tee -a "$S"
import json, sys
o = sys.argv[1]
def last(path):
    lines = [json.loads(l) for l in open(path) if l.startswith("{")]
    sus = [l for l in lines if l.get("suspect_pids")]
    return (sus or lines or [{}])[-1]
for side in ("inside", "outside"):
    try:
        v = last(f"{o}/{side}_check.jsonl")
        snap = json.load(open(f"{o}/{side}_snapshot.json"))
    except Exception as e:
        print(f"FAIL {side}: {e}")
        continue
    g0 = snap["gpus"][0]
    procs = {p["pid"]: (p.get("rank"), p.get("name"), p.get("nvml_pid")) for p in snap["processes"] if p["gpus"]}
    print(f"{side}: state={v.get('state')} suspect_pids={v.get('suspect_pids')} culprit={v.get('culprit_frame')}")
    print(f"{side}: GPU0 used={g0['mem_used_mb']} pids={g0['pids']} outside={g0.get('mem_outside_mb')}")
    print(f"{side}: gpu processes {procs}")
    print(f"{side}: reason: {v.get('reason')}")
PY
