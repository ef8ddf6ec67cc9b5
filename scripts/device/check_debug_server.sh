#!/usr/bin/env bash
# Issue 35 on a 4-GPU node (nvidia-h100-x4): PyTorch's debug server as evidence, and the
# blamed GPU's pair probe after the way out. Bounded: about 3 minutes (estimate), < 4 min.
#
# HOW TO RUN (in the repository root, on the GPU node; the wheels of run_all.sh in .whl/):
#   The debug server's front end (rank 0's child) imports tabulate and jinja2, and aiohttp
#   or requests: torch brings jinja2; carry tabulate (and aiohttp for its fetches, else it
#   uses requests) as wheels for the device's Python, e.g. here:
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_17_x86_64 --platform any -d .whl tabulate
#   then one device call (kind nvidia-h100-x4), carry [".whl"]:
#     LIMIT=240 bash scripts/device/run_all.sh ds check_debug_server
#   $OUT/results-ds.tgz holds debugserver_summary.txt: one PASS/FAIL line per item.
#
# Steps, each bounded by `timeout`; the job is killed (its process group) on exit:
#   0. torch has torch.distributed.debug.start_debug_server (2.10+; dump_dir needs a later
#      one): said first, and the run stops with a FAIL line that says so when it is absent.
#   1. scripts/device/multi_worker.py --spawn 4 stuck (NCCL, one rank per GPU, rank 2 sleeps
#      in load_next_batch_stuck after 5 s of healthy steps, the others wait in synchronize),
#      every rank calling start_debug_server after init, rank 0's front end on a free port,
#      periodic dumps every 5 s into $OUT/dumps, the flight recorder on (TORCH_FR_BUFFER_SIZE).
#   2. `gputui check --json --gpus 0,1,3`: rank 2's GPU is not watched, so gputui's own py-spy
#      never dumps rank 2 (a "remote" rank): its line must come from the debug server alone,
#      found by rank 0's child's socket. Lines stamped with their arrival (common.sh stamp):
#      the time from the onset to rank 2's line.
#   3. `gputui check --json` over all 4 GPUs: NVML names GPU 2, the stacks and the server
#      both name rank 2's line (they agree: no "sources disagree").
#   4. `check --probe-blamed --blame-gpu 2` while the ranks run: refused, naming the 4 pids.
#      The blame is FORCED with --blame-gpu: no real hardware fault can be caused on a lent
#      machine, and a program's Xid (31) blames nothing hardware.
#   5. The way out: gputui.tools.attach.endjob.end_ranks (the X key's code: named pids, each checked
#      again) ends the job's ranks on a live sample.
#   6. `check --debug-dump-dir $OUT/dumps` after the job is gone: rank 2's line from the
#      server's last dump, with the dump's time.
#   7. `check --probe-blamed --blame-gpu 2`: only GPU 2's 3 pairs run (NCCL), the result is
#      joined to the verdict (context: pairs alike); then with GPUTUI_PROBE_FAULT=exit:2-3:
#      a hardware finding "GPU 2 ↔ GPU 3: failed ..." and exit 3.
#
# Dry run without a GPU (the plumbing: gloo ranks, the stand-in libnvidia-ml.so.1 of
# tests/nvml_standin built into DIR, the probe on gloo; NVML-only items then say FAIL):
#   gcc -shared -fPIC -o DIR/libnvidia-ml.so.1 tests/nvml_standin/standin.c -lpthread
#   DS_DRY=DIR OUT=/tmp/ds bash scripts/device/check_debug_server.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1 TORCH_FR_BUFFER_SIZE=2000
source scripts/device/common.sh
O="${OUT:?set OUT to the output directory}"
mkdir -p "$O/dumps"
S="$O/debugserver_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
JOB=
trap 'stop_group "$JOB"' EXIT
DRY=${DS_DRY:-}
BACKEND=nccl
PROBE_BACKEND=nccl
PIDS=  # the ranks' pids, for the stand-in's GPUs in a dry run
if [ -n "$DRY" ]; then BACKEND=gloo; PROBE_BACKEND=gloo; fi
# E: the environment gputui runs in (`timeout ... "${E[@]}" python3 -m gputui ...`); in a dry
# run the stand-in's 4 GPUs, spinning with the ranks on them while the job runs (PIDS set),
# idle once it is gone. Call env_for_gputui after PIDS changes.
E=(env)
env_for_gputui() {
  E=(env)
  if [ -n "$DRY" ]; then
    local mode=""
    [ -n "$PIDS" ] && mode=spin
    E=(env LD_LIBRARY_PATH="$DRY" GPUTUI_STANDIN_NVML="$mode" GPUTUI_STANDIN_GPUS=4
      GPUTUI_STANDIN_PIDS="$PIDS")
  fi
}

# ---------------------------------------------------------------- 0. torch and the server
python3 -W ignore - >"$O/ds_env.txt" 2>&1 <<'PY'
import importlib.util, inspect, torch
print("torch", torch.__version__, "gpus", torch.cuda.device_count())
try:
    from torch.distributed.debug import start_debug_server
    print("start_debug_server", inspect.signature(start_debug_server))
except ImportError as e:
    print("ABSENT torch.distributed.debug:", e)
for m in ("tabulate", "jinja2", "aiohttp", "requests"):
    print(m, "yes" if importlib.util.find_spec(m) else "NO")
PY
say "INFO $(tr '\n' ';' <"$O/ds_env.txt")"
if grep -q '^ABSENT' "$O/ds_env.txt"; then
  say "FAIL debug server: this torch has no torch.distributed.debug (it came in 2.10)"
  exit 1
fi
if grep -q '^tabulate NO\|^jinja2 NO' "$O/ds_env.txt"; then
  say "FAIL debug server: the front end needs tabulate and jinja2 here (carry their wheels)"
  exit 1
fi
N=$(python3 -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
[ -n "$DRY" ] && N=4
[ "$N" -ge 4 ] || { say "FAIL debug server: $N GPUs here, the run needs 4"; exit 1; }

# ---------------------------------------------------------------- 1. the job
PORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('',0)); print(s.getsockname()[1])")
setsid python3 scripts/device/multi_worker.py --spawn 4 stuck 170 --backend "$BACKEND" --odd 2 \
  --onset 5 --debug-server "$PORT" --debug-dump-dir "$O/dumps" --debug-dump-interval 5 \
  >"$O/ds_job.log" 2>"$O/ds_job.err" &
JOB=$!
for _ in $(seq 1 180); do [ "$(grep -c '^IN ' "$O/ds_job.log")" -ge 4 ] && break; sleep 0.5; done
ONSET=$(python3 -c "
import re,sys
m=re.search(r'^ONSET .*t=([0-9.]+)', open(sys.argv[1]).read(), re.M); print(m.group(1) if m else 0)" "$O/ds_job.log")
say "INFO job: $(grep -c '^IN ' "$O/ds_job.log") ranks in place, $(grep -c '^DEBUGSERVER' "$O/ds_job.log") DEBUGSERVER lines, onset $ONSET, port $PORT"
grep '^DEBUGSERVER' "$O/ds_job.log" | head -4 >>"$S"
PIDS=$(python3 -c "
import re,sys
by = dict(re.findall(r'^READY rank=(\d+) pid=(\d+)', open(sys.argv[1]).read(), re.M))
print(','.join(by.get(str(r), '0') for r in range(4)))" "$O/ds_job.log")
env_for_gputui
UP=0
for _ in $(seq 1 120); do
  if python3 -c "
import sys, urllib.request
t = urllib.request.urlopen('http://127.0.0.1:$PORT/', timeout=2).read().decode()
sys.exit(0 if 'Torch Distributed Debug Server' in t else 1)" 2>/dev/null; then UP=1; break; fi
  sleep 0.5
done
[ "$UP" = 1 ] && say "PASS front end answers on $PORT" || { say "FAIL front end never answered on $PORT"; tail -20 "$O/ds_job.err" >>"$S"; exit 1; }

# ---------------------------------------------------------------- 2-3. check --json
timeout -k 5 60 "${E[@]}" python3 -m gputui check --json --gpus 0,1,3 --stall-after 5 --duration 15 \
  2>"$O/ds_check_remote.err" | stamp >"$O/ds_check_remote.jsonl"
timeout -k 5 60 "${E[@]}" python3 -m gputui check --json --stall-after 5 --duration 12 \
  2>"$O/ds_check_all.err" | stamp >"$O/ds_check_all.jsonl"
python3 - "$O/ds_check_remote.jsonl" "$O/ds_check_all.jsonl" "$ONSET" "$(hostname)" <<'PY' | tee -a "$S"
import json, re, sys
remote, whole, onset, host = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
line = next(n for n, ln in enumerate(open("scripts/device/multi_worker.py"), 1)
            if "time.sleep(min(1.0, left))" in ln)
want = f"load_next_batch_stuck (multi_worker.py:{line})"
def lines(p):
    return [json.loads(x) for x in open(p) if x.strip()]
r = lines(remote)
hit = next((x for x in r if "debugserver" in x and x.get("culprit_frame") == want), None)
if hit is None:
    print(f"FAIL remote rank 2 via the server: no line with culprit_frame {want}; reasons "
          f"{[x.get('reason', '')[:120] for x in r][-3:]}")
else:
    ds = hit["debugserver"]
    r2 = next((e for e in ds["ranks"] if e["rank"] == 2), {})
    own = sorted(s["rank"] for s in hit.get("stacks", []))
    ok = (hit["reason"].startswith(f"rank 2 on {host} (via the debug server) is in {want}")
          and r2.get("frame") == want and 2 not in own and hit["ranked"][0]["source"] == "debugserver")
    print(f"{'PASS' if ok else 'FAIL'} remote rank 2's line from the debug server alone: "
          f"{hit['reason'][:160]!r}; gputui's own stacks: ranks {own}; server {ds['server']} "
          f"found by {ds['found_by']!r}; asked at {ds['t']}, line arrived "
          f"{hit['_arrived'] - onset:.1f} s after the onset; seq {r2.get('seq')}")
w = lines(whole)
hit = next((x for x in w if "debugserver" in x and x.get("culprit_frame") == want), None)
if hit is None:
    print(f"FAIL whole node: no line with {want}; {[x.get('reason', '')[:120] for x in w][-2:]}")
else:
    srcs = sorted({f["source"] for f in hit["ranked"] if 2 in f["ranks"]})
    dis = [f["text"] for f in hit["ranked"] if f["text"].startswith("sources disagree")]
    ok = hit["suspects"] == [2] and {"debugserver", "stacks"} <= set(srcs) and not dis
    print(f"{'PASS' if ok else 'FAIL'} whole node: suspects {hit['suspects']}, rank 2 named by "
          f"{srcs}, disagreements {dis}, reason {hit['reason'][:140]!r}")
PY

# ---------------------------------------------------------------- 4. refused while ranks run
timeout -k 5 60 "${E[@]}" python3 -m gputui check --json --duration 2 --probe-blamed --blame-gpu 2 \
  >"$O/ds_refused.jsonl" 2>"$O/ds_refused.err"
python3 - "$O/ds_refused.jsonl" "$O/ds_job.log" <<'PY' | tee -a "$S"
import json, re, sys
last = json.loads(open(sys.argv[1]).read().splitlines()[-1])
p = last.get("blamed_probe", {})
pids = sorted(int(x) for x in re.findall(r"^READY rank=\d+ pid=(\d+)", open(sys.argv[2]).read(), re.M))
ok = p.get("outcome") == "refused" and sorted(p.get("held_by") or []) == pids and "end them first" in (p.get("error") or "")
print(f"{'PASS' if ok else 'FAIL'} --probe-blamed (forced: --blame-gpu 2) refused while the ranks "
      f"run: {p.get('outcome')}, held_by {p.get('held_by')} (ranks {pids}): {(p.get('error') or '')[:120]!r}")
PY

# ---------------------------------------------------------------- 5. the way out
timeout -k 5 60 "${E[@]}" python3 - "$JOB" <<'PY' | tee -a "$S"
import sys, time
from gputui.collect.live import LiveSource
from gputui.tools.attach.endjob import end_ranks, ranks_here
src = LiveSource(interval=1.0, timeout=10)
try:
    snap = src.sample()
finally:
    src.close()
jobs = [j for j in snap.jobs if len(j.pids) >= 4]
if not jobs:
    print(f"FAIL way out: no 4-rank job in the sample ({[j.label for j in snap.jobs]})"); sys.exit()
job = jobs[0]
ranks = ranks_here(job, snap.processes)
t = time.monotonic()
res = end_ranks(job, ranks)
print(f"{'PASS' if res.ok else 'FAIL'} way out (gputui.tools.attach.endjob, the X key's code): "
      f"{'; '.join(res.summary_lines())} in {time.monotonic() - t:.1f} s, pids {sorted(p.pid for p in ranks)}")
PY
stop_group "$JOB"  # the front end and the launcher
JOB=
PIDS=
env_for_gputui

# ---------------------------------------------------------------- 6. the dump, job gone
timeout -k 5 30 "${E[@]}" python3 -m gputui check --json --duration 2 --debug-dump-dir "$O/dumps" \
  >"$O/ds_dump.jsonl" 2>"$O/ds_dump.err"
python3 - "$O/ds_dump.jsonl" "$(hostname)" <<'PY' | tee -a "$S"
import json, sys, time
last = json.loads(open(sys.argv[1]).read().splitlines()[-1])
ds = last.get("debugserver") or {}
line = next(n for n, ln in enumerate(open("scripts/device/multi_worker.py"), 1)
            if "time.sleep(min(1.0, left))" in ln)
want = f"rank 2 on {sys.argv[2]} (via the debug server's dump) is in load_next_batch_stuck (multi_worker.py:{line})"
ok = ds.get("via") == "dump" and last.get("reason", "").startswith(want)
written = (ds.get("dump") or {}).get("written") or 0
print(f"{'PASS' if ok else 'FAIL'} job gone, its last dump: {last.get('reason', '')[:150]!r}, "
      f"{(ds.get('dump') or {}).get('file')} written {time.time() - written:.0f} s ago")
PY

# ---------------------------------------------------------------- 7. the blamed GPU's pairs
timeout -k 5 100 "${E[@]}" python3 -m gputui check --json --duration 2 --probe-blamed --blame-gpu 2 \
  --probe-backend "$PROBE_BACKEND" --probe-timeout 30 >"$O/ds_probe.jsonl" 2>"$O/ds_probe.err"
rc=$?
GPUTUI_PROBE_FAULT=exit:2-3 timeout -k 5 100 "${E[@]}" python3 -m gputui check --json --duration 2 \
  --probe-blamed --blame-gpu 2 --probe-backend "$PROBE_BACKEND" --probe-timeout 30 \
  >"$O/ds_probe_fault.jsonl" 2>"$O/ds_probe_fault.err"
rc2=$?
python3 - "$O/ds_probe.jsonl" "$rc" "$O/ds_probe_fault.jsonl" "$rc2" <<'PY' | tee -a "$S"
import json, sys
def last(p):
    try:
        return json.loads(open(p).read().splitlines()[-1])
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
a, rc, b, rc2 = last(sys.argv[1]), int(sys.argv[2]), last(sys.argv[3]), int(sys.argv[4])
p = a.get("blamed_probe", {})
pairs = [q["pair"] for q in p.get("pairs", [])]
gb = {f"{q['pair'][0]}-{q['pair'][1]}": q["gbps"] for q in p.get("pairs", [])}
joined = [f["text"] for f in a.get("ranked", []) if f["source"] == "blamed_probe"]
ok = p.get("outcome") == "done" and pairs == [[0, 2], [1, 2], [2, 3]] and all(q["ok"] for q in p["pairs"]) and joined
print(f"{'PASS' if ok else 'FAIL'} blamed GPU 2 (forced) probed after the way out: exit {rc}, "
      f"pairs {pairs} GB/s {gb}, {p.get('wall_s')} s; joined: {joined}")
p = b.get("blamed_probe", {})
top = (b.get("ranked") or [{}])[0]
ok = rc2 == 3 and top.get("strength") == "hardware" and top.get("text", "").startswith("GPU 2 ↔ GPU 3: failed")
print(f"{'PASS' if ok else 'FAIL'} a failing pair (GPUTUI_PROBE_FAULT=exit:2-3) joins as hardware: "
      f"exit {rc2}, {top.get('strength')}: {top.get('text', '')[:120]!r}")
PY
echo "done" >>"$S"
