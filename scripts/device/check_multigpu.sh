#!/usr/bin/env bash
# Issue 14, part 1 of 2, on a 4- or 8-GPU node (nvidia-h200-x4 / nvidia-h200-x8): the probe
# over all GPUs, the hang detector live with an N-rank NCCL job three ways, and dump --job.
# Part 2 (gputui against nvitop on the busy node) is scripts/device/check_multigpu_app.sh: together
# they would run ~9 minutes, too near the 10-minute limit of one device command.
#
# HOW TO RUN (the next session; everything below is prepared):
#   Here, once, in the repository root (wheels for the device's Python 3.12; the image has
#   torch, psutil, nvidia-ml-py, markdown-it-py, typing-extensions already; rich and pygments
#   are carried too, at the versions the tests run with, as textual 8.2 needs recent ones).
#   The command was checked here (2026-11-23): it fetches 7 wheels, about 5.5 MB.
#     echo /.whl/ >> .git/info/exclude
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl \
#       textual==8.2.8 mdit-py-plugins platformdirs rich==15.0.0 pygments==2.21.0 \
#       py-spy==0.4.3 nvitop==1.7.2
#   optional, for the tmux runner the earlier app figures used (else app_cpu.py uses a pty):
#     (cd .whl && apt-get download tmux libevent-core-2.1-7 libutempter0)   # Debian 12 here
#   Then two device calls (kind nvidia-h200-x8, else nvidia-h200-x4), carry [".whl"]:
#     LIMIT=500 bash scripts/device/run_all.sh mg1 check_multigpu       # ~5 min on 8 GPUs (estimate)
#     LIMIT=330 bash scripts/device/run_all.sh mg2 check_multigpu_app   # ~4 min
#   Each returns $OUT/results-<tag>.tgz; multigpu_summary.txt in it has one PASS/FAIL line
#   per item with the figures, for BENCHMARKS.md and docs/commands/probe.md ("a 4-GPU node was not
#   available" is what they replace).
#
# Parts and their expected time on 8 x H200 (estimates from the 2-GPU runs: probe 5-10 s,
# NCCL init < 1.5 s per rank, py-spy 14 ms per rank):
#   1. probe over all GPUs, JSON, timed (goal < 20 s for 4 GPUs, < 40 s for 8)        ~40 s
#   2. bare torch copy on every ordered pair at the probe's size (scripts/device/bare_copy.py
#      --all): every probe cell >= 95% of it; all_reduce bus bandwidth per pair          ~30 s
#   3. GPUTUI_PROBE_FAULT=hang:1-2 --timeout 15: only pair 1-2 fails, in its timeout,
#      and no probe worker is left running                                              ~60 s
#   4. scripts/device/multi_worker.py --spawn N in stuck, exit, mismatch (rank 3 the odd one),
#      `gputui check --json` alongside: the first stalled line's time after the onset
#      (goal <= 15 s), spinning, suspects, culprit_frame, findings                 3 x ~50 s
#   5. `gputui dump --job` over every rank of the stuck and the mismatch job, 3 times:
#      wall time and the grouping (inside 4)
# Every step is bounded by `timeout`; the jobs are killed (their process group) on exit.
#
# Dry run without a GPU (the plumbing: workers, waits, dump --job, the summaries; the check
# then sees no GPU and its lines say FAIL):  MULTIGPU_DRY=1 OUT=/tmp/mg bash scripts/device/check_multigpu.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
O="${OUT:?set OUT to the output directory}"
mkdir -p "$O"
S="$O/multigpu_summary.txt"
: >"$S"
DRY=${MULTIGPU_DRY:-}
BACKEND=nccl
[ -n "$DRY" ] && BACKEND=gloo
say() { echo "$*" | tee -a "$S"; }
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }
leftovers() {  # probe workers started from this checkout (not another user's on the host)
  local p
  for p in $(pgrep -f gputui.probe.worker); do
    [ "$(readlink "/proc/$p/cwd" 2>/dev/null)" = "$PWD" ] && tr '\0' ' ' <"/proc/$p/cmdline" && echo " (pid $p)"
  done
  return 0
}

if [ -n "$DRY" ]; then
  N=${MULTIGPU_RANKS:-4}
  PROBE=(python3 -m gputui probe --backend gloo --cpu "$N")
else
  N=$(python3 -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
  PROBE=(python3 -m gputui probe)
fi
python3 -c "import gputui, torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())" \
  >"$O/mg_env.txt" 2>&1
nvidia-smi topo -m >"$O/mg_topo.txt" 2>&1
say "INFO env: $(tail -1 "$O/mg_env.txt"); N=$N backend=$BACKEND"
if [ "$N" -lt 4 ]; then
  say "FAIL multigpu: $N GPUs here, the run needs 4 or 8"
  exit 1
fi
ODD=3
GOAL=$([ "$N" -le 4 ] && echo 20 || echo 40)

# ---------------------------------------------------------------- 1-3. the probe
t0=$(now)
timeout -k 5 150 "${PROBE[@]}" --json >"$O/mg_probe.json" 2>"$O/mg_probe.err"
rc=$?
wall=$(secs "$t0" "$(now)")
SIZE=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['size_bytes'])" "$O/mg_probe.json" 2>/dev/null || echo 268435456)
if [ -z "$DRY" ]; then
  timeout -k 5 150 python3 scripts/device/bare_copy.py "$SIZE" --all >"$O/mg_bare.json" 2>"$O/mg_bare.err"
fi
python3 - "$O/mg_probe.json" "$O/mg_bare.json" "$rc" "$wall" "$GOAL" "$N" <<'PY' | tee -a "$S"
import json, statistics, sys
path, bare_path, rc, wall, goal, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
try:
    d = json.load(open(path))
except Exception as e:
    print(f"FAIL probe matrix: exit {rc}, no JSON ({type(e).__name__}: {e})"); sys.exit()
ok = rc == 0 and d["ok"] and wall < goal and len(d["devices"]) == n
print(f"{'PASS' if ok else 'FAIL'} probe matrix: {n} GPUs, exit {rc}, wall {wall:.1f} s "
      f"(probe's own {d['wall_s']} s; goal < {goal:g} s), {len(d['pairs'])} pairs, "
      f"failures {d['failures']}")
try:
    bare = json.load(open(bare_path))
except Exception as e:
    bare = None
    print(f"FAIL probe copy vs bare torch copy: no reference ({type(e).__name__})")
if bare is not None:
    pct = {}
    for c in d["copy"]:
        ref = bare.get(f"{c['src']}->{c['dst']}")
        if ref and c["gbps"]:
            pct[f"{c['src']}->{c['dst']}"] = 100 * c["gbps"] / ref
    low = {k: round(v) for k, v in pct.items() if v < 95}
    ok = len(pct) == n * (n - 1) and not low
    gb = [c["gbps"] for c in d["copy"] if c["gbps"]]
    print(f"{'PASS' if ok else 'FAIL'} probe copy vs bare: {len(pct)}/{n * (n - 1)} cells, "
          f"probe/bare min {min(pct.values(), default=0):.0f}% median "
          f"{statistics.median(pct.values()) if pct else 0:.0f}% (goal >= 95%); probe "
          f"{min(gb, default=0):.0f}-{max(gb, default=0):.0f} GB/s, bare "
          f"{min((v for k, v in bare.items() if '->' in k), default=0):.0f}-"
          f"{max((v for k, v in bare.items() if '->' in k), default=0):.0f} GB/s at "
          f"{bare.get('bytes', 0) >> 20} MiB; below 95%: {low or 'none'}")
bus = [a["busbw_gbps"] for a in d["allreduce"] if a["busbw_gbps"]]
ok = len(bus) == n * (n - 1) // 2 and all(a["ok"] for a in d["allreduce"])
print(f"{'PASS' if ok else 'FAIL'} probe all_reduce: {len(bus)} pairs, bus bandwidth min "
      f"{min(bus, default=0):.0f} median {statistics.median(bus) if bus else 0:.0f} max "
      f"{max(bus, default=0):.0f} GB/s; per pair: "
      + ", ".join(f"{a['pair'][0]}-{a['pair'][1]} {a['busbw_gbps']}" for a in d["allreduce"]))
PY

t0=$(now)
GPUTUI_PROBE_FAULT=hang:1-2 timeout -k 5 150 "${PROBE[@]}" --json --timeout 15 \
  >"$O/mg_probe_hang.json" 2>"$O/mg_probe_hang.err"
rc=$?
wall=$(secs "$t0" "$(now)")
left=$(leftovers | tr '\n' ';')
python3 - "$O/mg_probe_hang.json" "$rc" "$wall" "$left" <<'PY' | tee -a "$S"
import json, sys
path, rc, wall, left = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"FAIL probe hang:1-2: exit {rc}, no JSON ({type(e).__name__})"); sys.exit()
pair = next((p for p in d["pairs"] if sorted(p["pair"]) == [1, 2]), None)
others_ok = all(p["ok"] for p in d["pairs"] if sorted(p["pair"]) != [1, 2])
only = [sorted(f["pair"]) for f in d["failures"]] == [[1, 2]]
inside = pair is not None and pair["elapsed_s"] is not None and pair["elapsed_s"] <= 15 + 6
ok = rc == 1 and only and others_ok and inside and not left
print(f"{'PASS' if ok else 'FAIL'} probe hang:1-2 --timeout 15: exit {rc} (want 1), wall {wall:.1f} s, "
      f"failures {d['failures']}, pair 1-2 took {pair and pair['elapsed_s']} s, other pairs ok "
      f"{others_ok}, probe workers left: {left or 'none'}")
PY

# ---------------------------------------------------------------- 4-5. detector and dump --job
JOB=
. scripts/device/common.sh
stop_job() { stop_group "$JOB"; JOB=; }
trap stop_job EXIT
trap 'stop_job; exit 143' TERM INT  # timeout(1) from run_all.sh: the setsid job too

pid_of() { grep -o "READY rank=$2 pid=[0-9]*" "$1" | head -1 | sed 's/.*pid=//'; }

for mode in stuck exit mismatch; do
  log="$O/mg_${mode}_job.txt"
  setsid python3 scripts/device/multi_worker.py --spawn "$N" "$mode" 150 --onset 10 --odd "$ODD" \
    --backend "$BACKEND" >"$log" 2>&1 &
  JOB=$!
  t0=$(now)
  for _ in $(seq 1 180); do  # at most 90 s for every rank to be ready
    [ "$(grep -c '^READY rank=' "$log")" -ge "$N" ] && break
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.5
  done
  ready=$(grep -c '^READY rank=' "$log")
  say "INFO $mode: $ready/$N ranks ready after $(secs "$t0" "$(now)") s"
  if [ "$ready" -lt "$N" ]; then
    say "FAIL detector $mode: the job did not start"; tail -20 "$log" | tee -a "$S"
    stop_job; continue
  fi
  # onset at +10 s, stalled at >= 10 s of spinning, then the auto-dump: 32 s covers it
  timeout -k 5 70 python3 -m gputui check --json --duration 32 --interval 0.5 \
    >"$O/mg_${mode}_check.jsonl" 2>"$O/mg_${mode}_check.err"
  rc=$?
  python3 - "$O/mg_${mode}_check.jsonl" "$log" "$mode" "$rc" "$N" "$ODD" <<'PY' | tee -a "$S"
import json, re, sys
path, log, mode, rc, n, odd = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
text = open(log, errors="replace").read()
m = re.search(r"^ONSET rank=\d+ pid=(\d+) step=\d+ t=([\d.]+)", text, re.M)
if not m:
    print(f"FAIL detector {mode}: no ONSET line from rank {odd}"); sys.exit()
odd_pid, onset = int(m[1]), float(m[2])
lines = []
for x in open(path, errors="replace"):
    try:
        lines.append(json.loads(x))
    except ValueError:
        pass
alarms = [d for d in lines if d["state"] != "ok"]
ev = next((d for d in lines if d.get("findings")), None)
others = [g for g in range(n) if g != odd]
if not alarms:
    print(f"FAIL detector {mode}: exit {rc}, no alarm in {len(lines)} line(s)"); sys.exit()
# the time is the first alarm's; what it names is judged on the last one (a GPU whose
# utilization reading lags may join the spinning set one sample later)
first, alarm = alarms[0], alarms[-1]
lat = first["t"] - onset
find = ev["findings"] if ev else []
if mode == "mismatch":
    right = alarm["spinning"] == list(range(n)) and alarm["suspects"] == []
    right = right and any(f.startswith("ranks entered different collectives") for f in find)
elif mode == "exit":
    right = alarm["spinning"] == others and alarm["suspects"] == [odd]
    right = right and any(f == f"rank {odd} (pid {odd_pid}) is gone: its process exited" for f in find)
else:
    right = alarm["spinning"] == others and alarm["suspects"] == [odd]
    right = right and bool(ev) and (ev.get("culprit_frame") or "").startswith("load_next_batch_stuck")
ok = rc == 1 and right and lat <= 15
ev_lat = f"+{ev['t'] - onset:.1f} s" if ev else "never"
seen = "" if first["spinning"] == alarm["spinning"] else f" (first line: {first['spinning']})"
print(f"{'PASS' if ok else 'FAIL'} detector {mode} ({n} ranks, rank {odd} odd): exit {rc}, first "
      f"{first['state']} +{lat:.1f} s after the onset (goal <= 15 s), last {alarm['state']}: "
      f"spinning {alarm['spinning']}{seen}, suspects {alarm['suspects']} pids "
      f"{alarm.get('suspect_pids')}; findings at {ev_lat}: "
      f"culprit_frame {ev and ev.get('culprit_frame')!r}; findings {find[:3]}")
PY
  if [ "$mode" != exit ]; then
    pid0=$(pid_of "$log" 0)
    walls=()
    for i in 1 2 3; do
      t0=$(now)
      timeout -k 5 60 python3 -m gputui dump --job "$pid0" --json >"$O/mg_${mode}_dump$i.json" \
        2>"$O/mg_${mode}_dump$i.err"
      walls+=("$(secs "$t0" "$(now)")")
    done
    python3 - "$O/mg_${mode}_dump1.json" "$mode" "$N" "$ODD" "${walls[*]}" <<'PY' | tee -a "$S"
import json, sys
path, mode, n, odd, walls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"FAIL dump --job {mode}: no JSON ({type(e).__name__})"); sys.exit()
groups = [(g["ranks"], g["odd"], (g["stack"] or ["-"])[0]) for g in d["groups"]]
others = [r for r in range(n) if r != odd]
ok = len(d["results"]) == n and [(r, o) for r, o, _ in groups] == [(others, False), ([odd], True)]
print(f"{'PASS' if ok else 'FAIL'} dump --job {mode} ({n} ranks): wall {walls} s (3 runs; "
      f"dump_all {d['elapsed_s']} s), found by {d['job']['how']!r}; groups "
      + " | ".join(f"{'ODD ' if o else ''}{r}: {top}" for r, o, top in groups))
PY
  fi
  nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,power.draw \
    --format=csv,noheader >"$O/mg_${mode}_smi.txt" 2>&1
  stop_job
done
say "INFO leftover probe workers at the end: [$(leftovers)]"
