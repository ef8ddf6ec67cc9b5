"""Compare `gputui snapshot --json` with nvidia-smi's figures taken right after it."""

import csv
import json
import sys

snap = json.load(open(sys.argv[1]))
smi = list(csv.reader(open(sys.argv[2]), skipinitialspace=True))
apps = list(csv.reader(open(sys.argv[3]), skipinitialspace=True))
ok = True
print(f"{'GPU':>3} {'field':<14} {'gputui':>12} {'nvidia-smi':>12}  match")
for g, row in zip(snap["gpus"], smi, strict=False):
    idx, name, util, mutil, power, plimit, mused, mtotal, temp, sm = row
    checks = [
        ("name", g["name"], name, g["name"] == name),
        (
            "power_limit_w",
            g["power_limit_w"],
            float(plimit),
            abs(g["power_limit_w"] - float(plimit)) < 1,
        ),
        (
            "mem_total_mb",
            round(g["mem_total_mb"]),
            float(mtotal),
            abs(g["mem_total_mb"] - float(mtotal)) <= 1,
        ),
        (
            "mem_used_mb",
            round(g["mem_used_mb"]),
            float(mused),
            abs(g["mem_used_mb"] - float(mused)) <= 0.02 * float(mtotal),
        ),
        ("util", g["util"], float(util), abs(g["util"] - float(util)) <= 30),
        (
            "power_w",
            round(g["power_w"]),
            float(power),
            abs(g["power_w"] - float(power)) <= 0.25 * float(plimit),
        ),
        ("temp_c", g["temp_c"], float(temp), abs(g["temp_c"] - float(temp)) <= 3),
        ("sm_mhz", g["sm_mhz"], float(sm), abs(g["sm_mhz"] - float(sm)) <= 300),
    ]
    for field, a, b, m in checks:
        ok &= m
        print(f"{idx:>3} {field:<14} {a!s:>12} {b!s:>12}  {'yes' if m else 'NO'}")
smi_pids = sorted(int(r[0]) for r in apps if r and r[0].strip().isdigit())
ours = sorted(p for g in snap["gpus"] for p in g["pids"])
print(f"compute pids: gputui {ours} nvidia-smi {smi_pids}  {'yes' if ours == smi_pids else 'NO'}")
ok &= ours == smi_pids
ranks = {p["pid"]: p["rank"] for p in snap["processes"]}
print("ranks:", ranks, "jobs:", [(j["label"], j["how"]) for j in snap["jobs"]])
print("MATCH" if ok else "MISMATCH")
