#!/usr/bin/env bash
# gputui vs nvitop only (figures 2 and 3 of issue 6), with nvitop's own screen kept:
#   bash scripts/device/run_all.sh TAG check_app_vs_nvitop
set -u
O="${OUT:?}"
mkdir -p "$O/bench"
# nvitop's first screen as tmux shows it, to check the first-frame markers against it
tmux -L nvt new-session -d -s nvt -x 160 -y 50 "env PYTHONPATH=$PYTHONPATH python3 -m nvitop --monitor full --interval 1"
sleep 6
tmux -L nvt capture-pane -p -t nvt >"$O/nvitop_screen.txt"
tmux -L nvt kill-server
head -30 "$O/nvitop_screen.txt"
cd bench || exit 1
timeout -k 5 170 python3 app_cpu.py --apps gputui nvitop --runner tmux --size 160x50 \
  --interval 1 --duration 60 --warmup 3 --frames 3 --frame-timeout 15 \
  --nvitop "python3 -m nvitop" --gputui "python3 -m gputui" \
  --json "$O/bench/app.json" 2>&1 | tee "$O/bench_app.txt"
