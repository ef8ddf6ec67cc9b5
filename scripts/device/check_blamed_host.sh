#!/usr/bin/env bash
# Issue 35, the blamed host, on a 4-GPU node: a real NCCL hang watched as four "hosts"
# (`check --gpus G --host H`, one GPU each), host c silent (its check never runs, as a node
# that does not answer), merged with --probe-blamed and the world probe over the local
# launcher (every "host" is this machine, its ranks NCCL_HOSTID'd apart, all 4 GPUs each):
#   1. while the job's ranks hold the GPUs: the verdict blames c, the probe is refused naming them;
#   2. after the job ends: the probe over c, d, b runs on NCCL and clears c;
#   3. with c's first rank killed after joining (GPUTUI_WORLD_FAULT=c:kill): c named broken.
#   LIMIT=420 bash scripts/device/run_all.sh bh check_blamed_host        (about 4 min)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
O="${OUT:?}"
S="$O/blamed_host_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
JOB=
. scripts/device/common.sh
trap 'stop_group "$JOB"' EXIT
say "INFO $(nvidia-smi -L | tr '\n' ';')"

log="$O/bh_job.txt"
setsid python3 scripts/device/multi_worker.py --spawn 4 stuck 120 --onset 6 --odd 2 >"$log" 2>&1 &
JOB=$!
for _ in $(seq 1 120); do [ "$(grep -c '^READY' "$log")" -ge 4 ] && break; sleep 0.5; done
[ "$(grep -c '^READY' "$log")" -ge 4 ] || { say "FAIL job did not start"; tail -5 "$log" >>"$S"; exit 1; }
for _ in $(seq 1 60); do grep -q '^ONSET' "$log" && break; sleep 0.5; done
say "INFO $(grep '^ONSET' "$log")"
checks=()
for hg in a:0 b:1 d:3; do  # c (GPU 2, the stuck rank's) sends nothing
  h=${hg%:*} g=${hg#*:}
  timeout 40 python3 -m gputui check --json --duration 16 --interval 0.5 --gpus "$g" --host "$h" \
    >"$O/bh_$h.jsonl" 2>"$O/bh_$h.err" &
  checks+=($!)
done
wait "${checks[@]}"
for h in a b d; do say "INFO check $h: $(wc -l <"$O/bh_$h.jsonl") lines, last: $(tail -1 "$O/bh_$h.jsonl" | cut -c1-160)"; done

merge() {  # NAME [ENV...]: merge the three checks with --probe-blamed, timed
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  env "$@" timeout -k 5 300 python3 -m gputui merge "$O"/bh_[abd].jsonl --expect a,b,c,d --json \
    --probe-blamed --probe-launcher local --probe-port 29640 --probe-timeout 60 \
    >"$O/bh_merge_$name.jsonl" 2>"$O/bh_merge_$name.err"
  local rc=$?
  python3 - "$O/bh_merge_$name.jsonl" "$name" "$rc" "$t0" <<'PY' | tee -a "$S"
import json, sys, time
path, name, rc, t0 = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
lines = [json.loads(x) for x in open(path) if x.strip()]
last = lines[-1] if lines else {}
b, rec = last.get("blamed_host") or {}, last.get("blamed_host_probe") or {}
print(f"{name}: exit {rc}, wall {time.time() - t0:.1f} s, state {last.get('state')}, "
      f"blamed {b.get('host')} ({b.get('source')}) with {b.get('neighbours')}")
print(f"  reason: {str(last.get('reason'))[:300]}")
print(f"  probe: outcome {rec.get('outcome')}, bad_hosts {rec.get('bad_hosts')}, bad_pairs "
      f"{rec.get('bad_pairs')}, busbw {rec.get('busbw_gbps')}, probe wall {rec.get('wall_s')} s")
for f in (last.get("findings") or [])[:3]:
    print(f"  finding: {f[:300]}")
want = {"held": "refused", "cleared": "done", "broken": "done"}[name]
ok = b.get("host") == "c" and rec.get("outcome") == want
if name == "cleared":
    ok = ok and rec.get("ok") is True and not rec.get("bad_hosts")
if name == "broken":
    ok = ok and list(rec.get("bad_hosts") or {}) == ["c"]
print(("PASS" if ok else "FAIL") + f" {name}")
PY
  tail -3 "$O/bh_merge_$name.err" >>"$S"
}
merge held
stop_group "$JOB"; JOB=
sleep 2
merge cleared
merge broken GPUTUI_WORLD_FAULT=c:kill
nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader >>"$S"
say "INFO done"
