#!/usr/bin/env python3
"""Measures how well `framegate qualify` finds silent data corruption: qualifications of
this CPU's kernel paths (cpu:avx512, cpu:avx2, cpu:default: tiny, fp32, one seed per
qualification) clean and with bit flips injected on one device (--inject-sdc), and prints a
Markdown table: per (bit class, rate, mode) the share of qualifications that called the
injected device FAULTY / DEGRADED / PASS, the false FAULTY and DEGRADED verdicts on the clean
devices, and the median qualification time.

  /usr/bin/python3 bench/sdc_detection.py --framegate build/bin/framegate \
      [--target cpu:avx512] [--clean 50] [--trials 20] [--repeats 2] [--calibrate]
      [--only exponent:1:transient,...] [--out results.jsonl]

--target is the device the flips go to (default cpu:avx512; on a CPU without AVX-512 the
fleet is cpu:avx2 and cpu:default, so name one of them).

--calibrate first runs `framegate calibrate` (tiny, fp32, seed 0): every qualification is
then judged with the model's FP32 step budget too, which is what judges the steps when
fewer than three devices give no majority (docs/qualification.md).

Each qualification uses another seed (another golden, other inputs and, with an injection,
other flip sites), so that no two are the same experiment. Goldens go to a scratch folder.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

SOURCE = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = [  # (bits, rate, mode)
    ("exponent", "1", "persistent"),
    ("exponent", "1", "transient"),
    ("exponent", "4", "persistent"),
    ("exponent", "0.5", "persistent"),
    ("sign", "1", "persistent"),
    ("mantissa-high", "1", "persistent"),
    ("mantissa-low", "1", "persistent"),
]


def qualify(framegate: str, work: pathlib.Path, seed: int, repeats: int, inject: str = "") -> Dict:
    matrix = work / f"m{seed}.toml"
    matrix.write_text(f'name = "sdc-bench"\n[axes]\npipelines = ["tiny"]\ndevices = ["cpu:*"]\n'
                      f'policies = ["fp32"]\nseeds = [{seed}]\n')
    golden_dir = work / "goldens"
    args = [framegate, "qualify", str(matrix), "--golden-dir", str(golden_dir), "--db", str(work / "q.db"),
            "--repeats", str(repeats), "--json", "-"]
    if inject:
        args += ["--inject-sdc", inject]
    start = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode == 2 and "no golden" in r.stderr:
        subprocess.run([framegate, "golden", "make", "--size", "tiny", "--seed", str(seed), "--golden-dir",
                        str(golden_dir)], check=True, capture_output=True)
        return qualify(framegate, work, seed, repeats, inject)
    if r.returncode not in (0, 1):
        sys.exit(f"qualify failed ({r.returncode}): {r.stderr.strip().splitlines()[-1:]}")
    verdicts = {d["device"]: d["verdict"] for d in json.loads(r.stdout)["devices"]}
    return {"seed": seed, "inject": inject, "verdicts": verdicts, "seconds": time.monotonic() - start}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framegate", default=str(SOURCE / "build/bin/framegate"))
    p.add_argument("--clean", type=int, default=50, help="clean qualifications")
    p.add_argument("--trials", type=int, default=20, help="qualifications per injection config")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--target", default="cpu:avx512", help="the device to inject flips on")
    p.add_argument("--only", help="injection configs to run, BITS:RATE:MODE,... (default: all)")
    p.add_argument("--calibrate", action="store_true", help="calibrate the tiny model first (a step budget)")
    p.add_argument("--out", help="one JSON line per qualification")
    o = p.parse_args()
    rows: List[Dict] = []
    out = open(o.out, "w") if o.out else None
    with tempfile.TemporaryDirectory(prefix="sdc-bench-") as tmp:
        work = pathlib.Path(tmp)
        if o.calibrate:
            subprocess.run([o.framegate, "calibrate", "--size", "tiny", "--policy", "fp32", "--seeds", "0",
                            "--golden-dir", str(work / "goldens")], check=True, capture_output=True)
        for seed in range(o.clean):
            rows.append(qualify(o.framegate, work, 1000 + seed, o.repeats))
            if out:
                print(json.dumps(rows[-1]), file=out, flush=True)
        configs = [c for c in CONFIGS if not o.only or ":".join(c) in o.only.split(",")]
        for bits, rate, mode in configs:
            for t in range(o.trials):
                rows.append(qualify(o.framegate, work, 1000 + t, o.repeats, f"{o.target}:{rate}:{mode}:{bits}"))
                if out:
                    print(json.dumps(rows[-1]), file=out, flush=True)
    clean = [r for r in rows if not r["inject"]]
    false_faulty = sum(v == "FAULTY" for r in clean for v in r["verdicts"].values())
    false_degraded = sum(v == "DEGRADED" for r in clean for v in r["verdicts"].values())
    print(f"clean: {len(clean)} qualifications x {len(clean[0]['verdicts']) if clean else 0} devices: "
          f"{false_faulty} FAULTY, {false_degraded} DEGRADED; "
          f"median {statistics.median(r['seconds'] for r in clean) if clean else float('nan'):.1f} s per "
          "qualification\n")
    print("| bits | rate (flips/pass) | mode | qualifications | FAULTY | DEGRADED | PASS (missed) "
          "| other devices not PASS | median s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for bits, rate, mode in CONFIGS:
        got = [r for r in rows if r["inject"] == f"{o.target}:{rate}:{mode}:{bits}"]
        if not got:
            continue
        n = len(got)
        count = {v: sum(r["verdicts"][o.target] == v for r in got) for v in ("FAULTY", "DEGRADED", "PASS")}
        others = sum(v != "PASS" for r in got for d, v in r["verdicts"].items() if d != o.target)
        print(f"| {bits} | {rate} | {mode} | {n} | {count['FAULTY'] / n:.0%} | {count['DEGRADED'] / n:.0%} "
              f"| {count['PASS'] / n:.0%} | {others} | {statistics.median(r['seconds'] for r in got):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
