#!/usr/bin/env bash
# Run device checks on a GPU node, each bounded, results packed into $OUT/results-<tag>.tgz.
#   bash scripts/device/run_all.sh TAG check_dashboard check_detector ...
# Expects the carried wheels in .whl/ (textual, py-spy, nvitop ...) and .deb files (strace).
set -u
tag=$1; shift
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
mkdir -p /tmp/dbg && for f in .whl/*.deb; do dpkg -x "$f" /tmp/dbg; done
export PATH=$PATH:/tmp/dbg/usr/bin LD_LIBRARY_PATH=/tmp/dbg/usr/lib/x86_64-linux-gnu
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
REAL_OUT=$OUT
export OUT=/tmp/results-$tag
mkdir -p "$OUT"
for name in "$@"; do
  echo "===== $name"
  start=$(date +%s.%N)
  timeout -k 10 "${LIMIT:-240}" bash "scripts/device/$name.sh" >"$OUT/$name.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  printf '===== %s rc=%s %.1fs\n' "$name" "$rc" "$(awk "BEGIN{print $end - $start}")" | tee -a "$OUT/summary.txt"
  tail -25 "$OUT/$name.log"
done
tar czf "$REAL_OUT/results-$tag.tgz" -C /tmp "results-$tag"
