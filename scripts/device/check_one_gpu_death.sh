#!/usr/bin/env bash
# A death needs no clock, on real NVML with the one GPU a 1-GPU node lends: two ranks (gloo on
# the CPU, each holding a CUDA context on GPU 0, started without a launcher as srun starts
# them); rank 1's DataLoader worker is SIGKILLed once `gputui check --json` has printed its
# first line, and the rank dies of it. NVML's compute-apps list is logged every 0.2 s, so the
# summary says how long NVML listed the dead rank's pid after its exit. PASS when check names
# "rank 1 died: its DataLoader worker (pid N) was killed by SIGKILL", no line after it is ok,
# and no process is shown as "not visible":
#   LIMIT=120 bash scripts/device/run_all.sh death check_one_gpu_death
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/death_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
. scripts/device/common.sh
PY="${PYTHON:-python3}"
say "INFO $(nvidia-smi -L | head -1)"
port=$((29400 + RANDOM % 300))
go="$O/death.go"
log="$O/death_ranks.out"
rm -f "$go"
setsid bash -c 'for r in 0 1; do
    GPUTUI_GLOO_ON_GPU=1 RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$2 "$1" scripts/device/cause_threads_worker.py \
      loader-kill --lifetime 60 --go "$3" &
  done; wait' _ "$PY" "$port" "$go" >"$log" 2>&1 &
JOB=$!
for _ in $(seq 1 120); do
  [ "$(grep -o 'READY rank=[0-9]*' "$log" | sort -u | wc -l)" -ge 2 ] && break
  sleep 0.5
done
nvidia-smi --query-compute-apps=pid --format=csv,noheader -lms 200 2>&1 |
  while read -r line; do echo "$(date +%s.%N) $line"; done >"$O/death_smi.txt" &
SMI=$!
(timeout 60 "$PY" -m gputui check --json --duration 20 --interval 0.5 \
  2>"$O/death_check.err"; echo "{\"_exit\": $?}") >"$O/death_check.jsonl" &
CHECK=$!
for _ in $(seq 1 60); do [ -s "$O/death_check.jsonl" ] && break; sleep 0.5; done
date +%s.%N >"$O/death_go_t.txt"
touch "$go"
wait "$CHECK"
kill "$SMI" 2>/dev/null
stop_group "$JOB"
"$PY" - "$O/death_check.jsonl" "$log" "$O/death_smi.txt" <<'PY' | tee -a "$S"
import json, re, sys
lines = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
out = open(sys.argv[2]).read()
code = next((x["_exit"] for x in lines if "_exit" in x), None)
lines = [x for x in lines if "_exit" not in x]
for x in lines:
    print(f"  {x['t'] % 1000:8.1f} {x['state']:8s} {x['reason'][:150]}")
kill = re.search(r"KILL pid=(\d+) t=(\d+\.\d+)", out)
died = next((i for i, x in enumerate(lines) if re.search(r"DataLoader worker \(pid \d+\) was killed by SIGKILL", x["reason"])), None)
after = lines[died:] if died is not None else []
ok_after = [x for x in after if x["state"] == "ok"]
hidden = [x for x in lines for p in x.get("processes", []) if "not visible" in str(p)]
pids = set(re.findall(r"READY rank=1 pid=(\d+)", out))
rank1 = next(iter(pids), None)
listed = [ln.split()[0] for ln in open(sys.argv[3]) if rank1 and ln.split()[1:2] == [rank1]]
if kill and died is not None:
    print(f"INFO named {lines[died]['t'] - float(kill.group(2)):.1f} s after the worker's kill")
if listed:
    print(f"INFO NVML listed rank 1 (pid {rank1}) until {float(listed[-1]) % 1000:.1f}")
ok = died is not None and not ok_after and not hidden and code == 1
print(f"{'PASS' if ok else 'FAIL'} death on 1 GPU: named={died is not None} ok_after={len(ok_after)} not_visible={len(hidden)} exit={code}")
PY
