#!/usr/bin/env bash
# The pairwise probe on a GPU node (run via: bash scripts/device/run_all.sh TAG check_probe).
# 1. gputui probe --json on all GPUs (default 256 MiB), timed; 2. the same at 1 GiB in text
# mode with --out, against 3. a bare torch 1 GiB peer copy loop (scripts/device/bare_copy.py);
# 4. injected hang:0-1 with --timeout 15 and 5. corrupt:0-1: exit 1 expected, the right
# reason, and no probe worker left (pgrep); 6. the gloo backend with 4 CPU devices.
# Every step is bounded by `timeout`; about 1.5 minutes in all on 2 x H200.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?set OUT to the output directory}"
mkdir -p "$O"
SUMMARY="$O/probe_summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }
leftovers() { pgrep -af gputui.probe.worker || true; }
fails() {  # the failures (and ok, wall) of a probe's JSON, or why there is none
  python3 - "$1" <<'PY' 2>&1 | tee -a "$SUMMARY"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    print("  ok", d["ok"], "wall_s", d["wall_s"], "failures", d["failures"])
except Exception as e:
    print("  no JSON:", type(e).__name__, e)
PY
}

python3 -c "import gputui, torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else None, 'gpus', torch.cuda.device_count())" \
  >"$O/probe_env.txt" 2>&1
say "env: $(tail -1 "$O/probe_env.txt")"
nvidia-smi topo -m >"$O/probe_topo.txt" 2>&1

# 1. all GPUs, JSON, wall time
t0=$(now)
timeout -k 5 120 python3 -m gputui probe --json >"$O/probe_all.json" 2>"$O/probe_all.err"
rc=$?
say "probe all: rc=$rc wall=$(secs "$t0" "$(now)")s"
python3 - "$O/probe_all.json" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("  no JSON:", e); sys.exit()
print("  devices", d["devices"], "ok", d["ok"], "wall_s", d["wall_s"], "size", d["size_bytes"])
for c in d["copy"]:
    print(f"  copy {c['src']}->{c['dst']}: {c['gbps']} GB/s ok={c['ok']}")
for a in d["allreduce"]:
    print(f"  all_reduce {a['pair']}: busbw {a['busbw_gbps']} GB/s, latency {a['latency_us']} us ok={a['ok']}")
for t in d["topology"]:
    print(f"  topology {t['pair']}: {t['label']} (nvlinks {t['nvlinks']}, pcie {t['pcie']})")
for p in d["pairs"]:
    print(f"  pair {p['pair']} round {p['round']} elapsed {p['elapsed_s']} s")
print("  failures", d["failures"]); print("  worst:", d["worst"]["text"])
PY
tail -3 "$O/probe_all.err"

# 2. 1 GiB, text mode (what a person sees), JSON through --out
t0=$(now)
timeout -k 5 120 python3 -m gputui probe --gpus 0,1 --size 1G --out "$O/probe_1g.json" \
  >"$O/probe_1g.txt" 2>&1
say "probe 1 GiB text: rc=$? wall=$(secs "$t0" "$(now)")s"
cat "$O/probe_1g.txt"

# 3. the bare copy loop, compared with the probe at the same size
timeout -k 5 90 python3 scripts/device/bare_copy.py >"$O/probe_bare.json" 2>"$O/probe_bare.err"
say "bare copy: rc=$? $(cat "$O/probe_bare.json")"
python3 - "$O/probe_bare.json" "$O/probe_1g.json" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    bare, probe = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
except Exception as e:
    print("  compare: missing input", e); sys.exit()
for c in probe["copy"]:
    ref = bare.get(f"{c['src']}->{c['dst']}")
    if ref and c["gbps"]:
        print(f"  copy {c['src']}->{c['dst']}: probe {c['gbps']} vs bare {ref} GB/s ({100 * c['gbps'] / ref:.0f}%)")
PY

# 4. an injected hang: one timeout, exit 1, nothing left behind
t0=$(now)
GPUTUI_PROBE_FAULT=hang:0-1 timeout -k 5 90 python3 -m gputui probe --gpus 0,1 --json --timeout 15 \
  >"$O/probe_hang.json" 2>"$O/probe_hang.err"
rc=$?
say "probe hang:0-1 --timeout 15: rc=$rc (expect 1) wall=$(secs "$t0" "$(now)")s"
fails "$O/probe_hang.json"; tail -2 "$O/probe_hang.err"
say "  leftover workers after hang: [$(leftovers)]"

# 5. injected corruption: the data check fails
t0=$(now)
GPUTUI_PROBE_FAULT=corrupt:0-1 timeout -k 5 90 python3 -m gputui probe --gpus 0,1 --json \
  >"$O/probe_corrupt.json" 2>"$O/probe_corrupt.err"
rc=$?
say "probe corrupt:0-1: rc=$rc (expect 1) wall=$(secs "$t0" "$(now)")s"
fails "$O/probe_corrupt.json"; tail -2 "$O/probe_corrupt.err"
say "  leftover workers after corrupt: [$(leftovers)]"

# 6. the CPU backend on this node's cores
t0=$(now)
timeout -k 5 90 python3 -m gputui probe --backend gloo --cpu 4 --json >"$O/probe_gloo.json" 2>"$O/probe_gloo.err"
rc=$?
say "probe gloo --cpu 4: rc=$rc wall=$(secs "$t0" "$(now)")s"
fails "$O/probe_gloo.json"
say "  leftover workers at the end: [$(leftovers)]"
