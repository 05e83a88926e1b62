#!/usr/bin/python3
"""Measures each dtype policy's distance from the FP32 golden over several seeds and prints
the table that checks/tolerances.toml's bounds come from (docs/tolerances.md).

Usage: bench/calibrate_tolerances.py [--framegate build/bin/framegate] [--seeds 0,1,2,3,4]
       [--size tiny] [--work /tmp/fg-calibrate]
Makes the goldens it needs in --work (not in the repository), runs `framegate check --json`
for every preset policy and seed, and prints per policy the worst value of each metric and
the bound the shipped profile sets, with the margin between them.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tomllib

METRICS = [  # (metric, profile key, larger is better)
    ("min_psnr", "min_psnr", True),
    ("min_ssim", "min_ssim", True),
    ("max_abs", "max_abs", False),
    ("rel_l2", "max_rel_l2", False),
    ("temporal_rel_l2", "max_temporal_rel_l2", False),
    ("latent_cosine", "min_latent_cosine", True),
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framegate", default=os.path.join(repo, "build/bin/framegate"))
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--work", default="/tmp/fg-calibrate")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--device", default="cpu", help="device the policies run on (goldens: cpu)")
    ap.add_argument("--faults", default="none,attn-overflow,activation-overflow",
                    help="reference models to measure: the clean one and fault cases that "
                         "run in FP32 (their remedy policies must pass)")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    policies_toml = tomllib.load(open(os.path.join(repo, "pipelines/policies.toml"), "rb"))
    policies = sorted(policies_toml["policy"].keys())
    profiles = tomllib.load(open(os.path.join(repo, "checks/tolerances.toml"), "rb"))["profile"]
    goldens = os.path.join(args.work, "golden")
    os.makedirs(goldens, exist_ok=True)
    worst = {}  # policy -> metric -> (value, seed)
    status = {}
    for seed, fault in [(s, f) for f in args.faults.split(",") for s in seeds]:
        fault_args = [] if fault == "none" else ["--fault", fault]
        subprocess.run([args.framegate, "golden", "make", "--size", args.size, "--seed", str(seed),
                        "--golden-dir", goldens, "--threads", args.threads, *fault_args],
                       check=True, stdout=subprocess.DEVNULL)
        out = os.path.join(args.work, f"seed{seed}-{fault}.json")
        subprocess.run([args.framegate, "check", "--size", args.size, "--seed", str(seed),
                        "--device", args.device,
                        "--policy", ",".join(policies), "--golden-dir", goldens, "--json", out,
                        "--threads", args.threads, *fault_args],
                       stdout=subprocess.DEVNULL)
        for cell in json.load(open(out))["cells"]:
            p = cell["policy"]
            status.setdefault(p, set()).add(cell["status"])
            if not cell["metrics"]:
                continue
            for metric, _, higher_better in METRICS:
                v = cell["metrics"][metric]
                v = math.inf if v is None and metric == "min_psnr" else v
                if v is None:
                    continue
                cur = worst.setdefault(p, {}).get(metric)
                if cur is None or (v < cur[0] if higher_better else v > cur[0]):
                    worst[p][metric] = (v, f"{seed}/{fault}")
    print(f"Worst value over seeds {args.seeds} x models {args.faults} ({args.size}), the shipped "
          "bound, and the margin")
    print("(PSNR: dB above the bound; others: bound / worst for errors, (1-bound)/(1-worst) for "
          "similarities).\n")
    print("| policy | statuses | " + " | ".join(m for m, _, _ in METRICS) + " |")
    print("|---|---|" + "---|" * len(METRICS))
    for p in policies:
        cells = []
        for metric, key, higher_better in METRICS:
            w = worst.get(p, {}).get(metric)
            bound = profiles.get(p, {}).get(key)
            if w is None:
                cells.append("-")
                continue
            v = w[0]
            text = "inf" if math.isinf(v) else f"{v:.4g}"
            if bound is not None:
                if metric == "min_psnr":
                    margin = "inf" if math.isinf(v) else f"+{v - bound:.1f} dB"
                elif higher_better:
                    margin = "inf" if v >= 1 else f"{(1 - bound) / (1 - v):.1f}x"
                else:
                    margin = "inf" if v == 0 else f"{bound / v:.1f}x"
                text += f" (bound {bound:g}, {margin})"
            cells.append(text)
        print(f"| {p} | {','.join(sorted(status.get(p, [])))} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
