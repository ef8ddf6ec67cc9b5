#!/usr/bin/env bash
# Arriving late, and progress is not a hang, on 4 GPUs (kind nvidia-h100-x4), < 4.5 min:
#  1. late-srun: 4 ranks started as srun starts them (no agent, one shared output file, as
#     `srun -o job.out`: rank_worker.py --output); rank 1 dies of a real Xid 31 (a Triton
#     out-of-bounds store) BEFORE gputui starts; `check --json` started 20 s later must quote
#     "rank 1 died N s ago: ... illegal memory access" with N >= 20.
#  2. late-torchrun: two torchrun agents acting as two nodes (--nnodes 2 --nproc-per-node 2,
#     c10d rendezvous, NCCL_HOSTID and CUDA_VISIBLE_DEVICES per agent, both appending to one
#     file); rank 3 dies of an Xid 31 before gputui starts, its agent writes its record and
#     exits; the other agent's ranks wait. `check --json` 20 s later must quote rank 3 with
#     its age and the agent's record of its exit.
#  3. checkpoint: rank 0 writes a CKPT_GB GiB state dict with torch.save (then os.sync) while
#     the peers wait: busy with the rate, no alarm, exit 0 (--stall-after 4, so that a save
#     of a few seconds is judged too). Then stuck (the control): rank 0 sleeps; stalled within
#     15 s of the onset, exit 1.
# Each with its detection time (onset -> first line) and the dashboard at 80x24 in tmux,
# captured with no key pressed. Results: $OUT/late_summary.txt (PASS/FAIL lines) and a few
# files per scenario.
#   LIMIT=270 bash scripts/device/run_all.sh late check_late
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/late_summary.txt"
: >"$S"
. "$(dirname "$0")/common.sh"
JOB=
JOB2=
CASES=" ${LATE_CASES:-srun torchrun ckpt stuck} "  # a subset: LATE_CASES="ckpt stuck"
want() { [[ "$CASES" == *" $1 "* ]]; }
CKPT_GB="${CKPT_GB:-16}"
trap 'stop_group "$JOB"; stop_group "$JOB2"; tmux kill-server 2>/dev/null' EXIT
echo "INFO $(nvidia-smi -L | tr '\n' ' ')" | tee -a "$S"
echo "INFO core_pattern $(cat /proc/sys/kernel/core_pattern); kmsg $(head -c 0 /dev/kmsg 2>&1 && echo readable)" | tee -a "$S"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_for FILE PATTERN SECONDS: until grep finds PATTERN in FILE (1 if it never does)
wait_for() {
  for _ in $(seq 1 $(($3 * 2))); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.5; done
  return 1
}

# watch NAME DURATION [ARGS...]: `check --json` (stamped) beside the 80x24 dashboard; sets RC
watch() {
  local name=$1 dur=$2
  shift 2
  tmux new-session -d -s dash -x 80 -y 24 "python3 -m gputui --no-mouse $*"
  date +%s.%N >"$O/${name}_t0.txt"
  timeout $((dur + 30)) python3 -m gputui check --json --interval 0.5 --duration "$dur" "$@" \
    2>"$O/${name}.err" | stamp >"$O/${name}.jsonl"
  RC=${PIPESTATUS[0]}
  tmux capture-pane -p -t dash >"$O/${name}_dashboard_80x24.txt" 2>&1
  tmux kill-server 2>/dev/null
}

# judge NAME RC ONSET KIND: the summary lines of one scenario (python below)
judge() {
  python3 - "$O" "$1" "$2" "$3" "$4" <<'PY' | tee -a "$S"
import json, re, sys
out, name, rc, onset, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
lines = [json.loads(x) for x in open(f"{out}/{name}.jsonl") if x.strip()]
t0 = float(open(f"{out}/{name}_t0.txt").read())
print(f"{name}: exit {rc}, {len(lines)} line(s): " + ", ".join(
    f"+{d['_arrived'] - t0:.1f}s {d['state']}" for d in lines))
def first(pred):
    return next((d for d in lines if pred(d)), None)
ok, hit = False, None
if kind == "late":
    who = {"late_srun": "1", "late_torchrun": "3"}[name]
    rx = re.compile(rf"rank {who}( \(on another node\))?( \(pid \d+\))? died (\d+) (s|min) ago: .*illegal memory access")
    hit = first(lambda d: any(rx.search(f) for f in [d["reason"], *d.get("findings", [])]))
    if hit:
        text = next(f for f in [hit["reason"], *hit.get("findings", [])] if rx.search(f))
        m = rx.search(text)
        age = int(m.group(3)) * (60 if m.group(4) == "min" else 1)
        late = [e for e in hit.get("lastwords", {}).get("ranks", []) if e.get("late") and str(e.get("rank")) == who]
        print(f"  quoted at +{hit['_arrived'] - t0:.1f} s after check started: {text}")
        print(f"  died {onset and hit['_arrived'] - onset:.1f} s before that line (by the worker's own clock); said {age} s")
        for e in late:
            print(f"  entry: {json.dumps({k: e.get(k) for k in ('pid', 'held_by', 'log', 'dated_by', 'died_at', 'exit', 'cause')})[:700]}")
        ok = rc == 1 and age >= 15
    says = [(d["state"], tuple(re.sub(r"\d+ (s|min) ago", "ago", f) for f in d.get("findings", []))) for d in lines]
    repeats = sum(a == b for a, b in zip(says, says[1:]))
    print(f"  repeated lines (same state and findings): {repeats}")
    ok = ok and repeats <= 1 and len(lines) <= 5  # before: a new line every second
elif kind == "busy":
    busy = [d for d in lines if d["state"] == "busy"]
    alarm = [d for d in lines if d["state"] in ("stalled", "hung")]
    if busy:
        b = busy[-1]["busy"]
        print(f"  busy at +{busy[0]['_arrived'] - onset:.1f} s after the checkpoint began: {busy[0]['reason']}")
        print(f"  last: {busy[-1]['reason']}; busy={json.dumps(b)}")
    for d in alarm:
        print(f"  ALARM +{d['_arrived'] - t0:.1f}s {d['reason'][:200]}")
    ok = rc == 0 and busy and not alarm and busy[-1]["busy"]["what"] == "writes a checkpoint"
elif kind == "stuck":
    hit = first(lambda d: d["state"] in ("stalled", "hung"))
    if hit:
        print(f"  stalled {hit['_arrived'] - onset:.1f} s after rank 0 stopped (since -> line {hit['t'] - hit['since']:.1f} s): {hit['reason'][:200]}")
        print(f"  findings: {[f[:120] for f in hit.get('findings', [])][:4]}")
    ok = rc == 1 and hit is not None and hit["_arrived"] - onset <= 15 and not any(d["state"] == "busy" for d in lines)
print(("PASS" if ok else "FAIL") + f" {name}")
PY
  echo "== $1 dashboard (80x24, no key pressed):" >>"$S"
  cat "$O/$1_dashboard_80x24.txt" >>"$S"
}

phase_t() { grep -o "what=$2 t=[0-9.]*" "$1" | head -1 | sed 's/.*t=//'; }

# ---------------------------------------------------------------- 1. srun-like, one file
if want srun; then
out1="$O/late_srun_job.out"
: >"$out1"
setsid python3 scripts/device/rank_worker.py --world 4 --seconds 200 --output "$out1" \
  --die 1:5:xid >"$O/late_srun_launcher.txt" 2>&1 &
JOB=$!
if wait_for "$out1" "ERROR rank=1" 120 && wait_for "$out1" "^\[rank1\]: [A-Za-z.]*Error" 10; then
  died=$(phase_t "$out1" die-xid)
  echo "INFO late_srun: rank 1 died at $died; check starts in 20 s" | tee -a "$S"
  sleep 20
  watch late_srun 14
  judge late_srun "$RC" "$died" late
else
  echo "FAIL late_srun: rank 1 never died ($(tail -3 "$out1" | tr '\n' ' '))" | tee -a "$S"
fi
stop_group "$JOB"
JOB=
fi

# ---------------------------------------------------------------- 2. two torchrun agents
if want torchrun; then
out2="$O/late_torchrun_job.out"
: >"$out2"
port=$(free_port)
# Agent 0 first: it hosts the rendezvous store (its port is bound first) and joins first, so
# it gets ranks 0 and 1 and survives; agent 1 gets ranks 2 and 3, rank 3 dies, agent 1 writes
# its record and exits (tried with torch 2.13 on CPU: the surviving agent keeps its ranks).
for node in 0 1; do
  CUDA_VISIBLE_DEVICES=$((2 * node)),$((2 * node + 1)) NCCL_HOSTID="node$node" \
    setsid python3 -m torch.distributed.run --nnodes 2 --node-rank "$node" --nproc-per-node 2 \
    --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id late2 --max-restarts 0 \
    scripts/device/rank_worker.py --seconds 200 --die 3:5:xid >>"$out2" 2>&1 &
  if [ "$node" = 0 ]; then
    JOB=$!
    for _ in $(seq 1 40); do
      python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 1)" \
        2>/dev/null && break
      sleep 0.5
    done
  else
    JOB2=$!
  fi
done
if wait_for "$out2" "Root Cause" 150; then
  died=$(phase_t "$out2" die-xid)
  echo "INFO late_torchrun: rank 3 died at $died, its agent wrote its record; check in 20 s" | tee -a "$S"
  sleep 20
  watch late_torchrun 14
  judge late_torchrun "$RC" "$died" late
else
  echo "FAIL late_torchrun: no agent record ($(grep -v Warning "$out2" | tail -3 | tr '\n' ' '))" | tee -a "$S"
fi
stop_group "$JOB"
stop_group "$JOB2"
JOB= JOB2=
fi

# ---------------------------------------------------------------- 3. checkpoint, then stuck
if want ckpt; then
out3="$O/ckpt_job.out"
: >"$out3"
setsid python3 scripts/device/rank_worker.py --world 4 --seconds 80 --output "$out3" \
  --checkpoint "0:$CKPT_GB:10" --ckpt-dir "${CKPT_DIR:-/tmp/gputui-ckpt}" \
  >"$O/ckpt_launcher.txt" 2>&1 &
JOB=$!
if wait_for "$out3" "READY rank=3" 120 && wait_for "$out3" "READY rank=0" 120; then
  watch ckpt 45
  began=$(phase_t "$out3" checkpoint)
  done_t=$(grep -o "what=checkpoint-done t=[0-9.]*" "$out3" | head -1 | sed 's/.*t=//')
  echo "INFO ckpt: torch.save of $CKPT_GB GiB + sync from $began to ${done_t:-?}" | tee -a "$S"
  judge ckpt "$RC" "${began:-0}" busy
else
  echo "FAIL ckpt: ranks not ready ($(tail -3 "$out3" | tr '\n' ' '))" | tee -a "$S"
fi
stop_group "$JOB"
JOB=
rm -rf "${CKPT_DIR:-/tmp/gputui-ckpt}"
fi

if want stuck; then
out4="$O/stuck_job.out"
: >"$out4"
setsid python3 scripts/device/rank_worker.py --world 4 --seconds 80 --output "$out4" \
  --stuck 0:6 >"$O/stuck_launcher.txt" 2>&1 &
JOB=$!
if wait_for "$out4" "READY rank=3" 120; then
  watch stuck 20
  judge stuck "$RC" "$(phase_t "$out4" stuck)" stuck
else
  echo "FAIL stuck: ranks not ready" | tee -a "$S"
fi
stop_group "$JOB"
JOB=
fi
grep -c '^PASS' "$S" | sed 's/^/passed: /' | tee -a "$S"
