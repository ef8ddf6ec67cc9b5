#!/usr/bin/env bash
# The world probe (gputui probe --hosts) on a GPU node: two "hosts" h1, h2 sharing GPU 0, told
# apart by NCCL_HOSTID (the `local` launcher sets it per host; the image has no sshd, so ssh is
# exercised by the CI tests instead). 1. the world, JSON, wall time (goal < 20 s); 2. a bare
# torch all_reduce of the same size and iterations between two ranks on GPU 0 with distinct
# NCCL_HOSTIDs, beside the probe's figure; 3. text mode (what a person sees: the NCCL line);
# 4. an injected killed rank on h2: exit 1, h2 named, nothing left running (pgrep).
# Run via: bash scripts/device/run_all.sh TAG check_world_probe. About 1 minute; every step bounded.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?set OUT to the output directory}"
mkdir -p "$O"
SUMMARY="$O/world_summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }
leftovers() { pgrep -af -- --world-worker || true; }
SIZE=$((64 << 20))
PORT=29611

python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())" \
  >"$O/world_env.txt" 2>&1
say "env: $(tail -1 "$O/world_env.txt")"

# 1. the world: two hosts on one GPU, JSON lines
t0=$(now)
timeout -k 5 120 python3 -m gputui probe --hosts h1,h2 --launcher local --gpus-per-host 1 \
  --port $PORT --host-timeout 60 --json >"$O/world.jsonl" 2>"$O/world.err"
rc=$?
say "world probe h1,h2 (1 GPU each, shared): rc=$rc (expect 0) wall=$(secs "$t0" "$(now)")s"
python3 - "$O/world.jsonl" "$SIZE" <<'PY' | tee -a "$SUMMARY"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for l in lines:
    if l["kind"] == "host":
        print(f"  host {l['host']}: ok={l['ok']} ranks={l['ranks']} backend={l['backend']} joined={l['joined_s']} why={l['why']}")
    elif l["kind"] == "world":
        print(f"  world: ok={l['ok']} ranks={l['ranks']} rendezvous={l['rendezvous_s']} s barrier={l['barrier_s']} s")
        for s in l["sizes"]:
            print(f"    {s['bytes'] >> 20} MiB: busbw {s['busbw_gbps']} GB/s (fastest rank {s['max_gbps']})")
    elif l["kind"] == "nccl":
        print(f"  nccl: version {l.get('version')} network {l.get('network')} ifaces {l.get('ifaces')} transports {l.get('transports')} env {l.get('env')}")
    elif l["kind"] in ("finding", "summary", "cleanup"):
        print(f"  {l['kind']}: {l}")
PY
tail -3 "$O/world.err"

# 2. the bare all_reduce, same size and iterations, beside the probe's figure
timeout -k 5 120 python3 scripts/device/bare_allreduce.py $SIZE 5 $((PORT + 50)) >"$O/world_bare.json" 2>"$O/world_bare.err"
say "bare all_reduce: rc=$? $(cat "$O/world_bare.json")"
python3 - "$O/world.jsonl" "$O/world_bare.json" "$SIZE" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    world = next(json.loads(l) for l in open(sys.argv[1]) if '"kind": "world"' in l)
    bare = json.load(open(sys.argv[2]))
except Exception as e:
    print("  compare: missing input", e); sys.exit()
probe = next((s["busbw_gbps"] for s in world["sizes"] if s["bytes"] == int(sys.argv[3])), None)
if probe and bare.get("busbw_gbps"):
    print(f"  {int(sys.argv[3]) >> 20} MiB all_reduce: probe {probe} vs bare {bare['busbw_gbps']} GB/s ({100 * probe / bare['busbw_gbps']:.0f}%)")
PY

# 3. text mode, with --bisect (each host alone, the pair)
t0=$(now)
timeout -k 5 150 python3 -m gputui probe --hosts h1,h2 --launcher local --gpus-per-host 1 \
  --port $((PORT + 100)) --host-timeout 60 --bisect >"$O/world.txt" 2>&1
say "world probe text --bisect: rc=$? wall=$(secs "$t0" "$(now)")s"
cat "$O/world.txt"

# 3b. the same world through a real sshd on 127.0.0.1/127.0.0.2, when sshd is here (the image
# has none; carry openssh-server's .deb in .whl/ and run_all.sh unpacks it to /tmp/dbg)
SSHD=$(command -v sshd || ls /tmp/dbg/usr/sbin/sshd 2>/dev/null || true)
if [ -n "$SSHD" ] && command -v ssh >/dev/null && command -v ssh-keygen >/dev/null; then
  D=$(mktemp -d); SP=$((PORT + 300))
  ssh-keygen -q -t ed25519 -N '' -f "$D/host" && ssh-keygen -q -t ed25519 -N '' -f "$D/user"
  cp "$D/user.pub" "$D/authorized_keys"; chmod 600 "$D/authorized_keys"; mkdir -p /run/sshd
  printf 'Port %s\nListenAddress 127.0.0.1\nListenAddress 127.0.0.2\nHostKey %s/host\nAuthorizedKeysFile %s/authorized_keys\nPidFile %s/sshd.pid\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nPermitRootLogin yes\n' \
    "$SP" "$D" "$D" "$D" >"$D/sshd_config"
  "$SSHD" -D -e -f "$D/sshd_config" 2>"$O/world_sshd.log" & SSHD_PID=$!
  printf 'Host h1\n  HostName 127.0.0.1\nHost h2\n  HostName 127.0.0.2\nHost *\n  Port %s\n  User %s\n  IdentityFile %s/user\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n' \
    "$SP" "$(id -un)" "$D" >"$D/ssh_config"
  printf '#!/bin/sh\nexec env PYTHONPATH=%s LD_LIBRARY_PATH=%s NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 %s -m gputui "$@"\n' \
    "$PYTHONPATH" "${LD_LIBRARY_PATH:-}" "$(command -v python3)" >"$D/gputui"; chmod +x "$D/gputui"
  sleep 1
  t0=$(now)
  GPUTUI_WORLD_HOSTID=1 timeout -k 5 120 python3 -m gputui probe --hosts h1,h2 --ssh-config "$D/ssh_config" \
    --remote-gputui "$D/gputui" --gpus-per-host 1 --port $((PORT + 150)) --host-timeout 60 >"$O/world_ssh.txt" 2>&1
  say "world probe over ssh: rc=$? wall=$(secs "$t0" "$(now)")s"
  cat "$O/world_ssh.txt"
  kill "$SSHD_PID" 2>/dev/null
else
  say "world probe over ssh: skipped (no sshd here; carry openssh-server's .deb to run it)"
fi

# 4. a rank killed on h2: named, exit 1, nothing left
t0=$(now)
GPUTUI_WORLD_FAULT=h2:kill timeout -k 5 150 python3 -m gputui probe --hosts h1,h2 --launcher local \
  --gpus-per-host 1 --port $((PORT + 200)) --host-timeout 30 >"$O/world_kill.txt" 2>&1
rc=$?
say "world probe with h2:kill: rc=$rc (expect 1) wall=$(secs "$t0" "$(now)")s"
grep -A5 "findings:" "$O/world_kill.txt" | tee -a "$SUMMARY"
say "  leftover world workers: [$(leftovers)]"
