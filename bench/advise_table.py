#!/usr/bin/python3
"""Prints what `framegate advise` returns and costs on every failing example: the example
packages (pipelines/examples/make_example_packages.py), the zoo's planted defects when
pipelines/examples/make_zoo_packages.py exists, and the reference model's --fault cases.

One row per (case, policy): status before and after, runs, the islands, the share of the
weights they keep in FP32, the culprit (where the failure is made) and its module's share,
the ratio of the two (the issue's target: at most 3), and the wall time of the command.

Usage: bench/advise_table.py [--build build] [--threads 1] [--max-runs 12] [--only SUBSTR]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = (("f1-time-embed", "bf16"), ("f4-input-fp32", "bf16"), ("f3-ff-overflow", "fp16-emulated"),
            ("f2-accumulation", "fp16-emulated-fp16-accum"), ("nan-in-body", "fp16-emulated"))
FAULTS = (("attn-overflow", "fp16-emulated"), ("attn-fp16-accum", "fp16-emulated-fp16-accum"),
          ("activation-overflow", "fp16-emulated"), ("time-embed-fp32", "bf16"))
ZOO_POLICIES = ("bf16", "fp16-emulated", "fp8e4m3-bf16", "fp8e5m2-bf16")


def framegate(build, *args, threads):
    return subprocess.run([str(build / "bin" / "framegate"), *map(str, args), "--threads", threads],
                          capture_output=True, text=True)


def row(label, policy, r, wall):
    if r.returncode == 2:
        return f"| {label} | {policy} | error: {r.stderr.strip()[:80]} | | | | | | | {wall:.1f} |"
    a = json.loads(r.stdout)
    share, culprit_share = a["fp32_weight_fraction"], a.get("culprit_weight_fraction") or 0
    ratio = f"{share / culprit_share:.2f}" if a["islands"] and culprit_share else "-"
    islands = ", ".join(a["islands"]) or (a.get("note") or "(none)")[:90]
    return (f"| {label} | {policy} | {a['status_before']} -> {a['status_after']} | {len(a['runs'])} | "
            f"{islands} | {100 * share:.1f}% | {a.get('culprit') or '-'} | {100 * culprit_share:.1f}% | "
            f"{ratio} | {wall:.1f} |")


def advise(build, label, policy, where, goldens, args):
    start = time.monotonic()
    r = framegate(build, "advise", *where, "--policy", policy, "--golden-dir", goldens, "--json", "-",
                  "--max-runs", args.max_runs, threads=args.threads)
    return row(label, policy, r, time.monotonic() - start)


def zoo_cases(tmp):
    script = REPO / "pipelines/examples/make_zoo_packages.py"
    if not script.exists():
        return []
    subprocess.run([sys.executable, str(script), str(tmp / "zoo")], check=True, capture_output=True)
    return sorted(p for p in (tmp / "zoo").iterdir() if (p / "model.toml").exists())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--threads", default="1")
    ap.add_argument("--max-runs", default="12")
    ap.add_argument("--only", default="", help="only cases whose label contains this")
    args = ap.parse_args()
    build = pathlib.Path(args.build)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        goldens = tmp / "goldens"
        subprocess.run([sys.executable, str(REPO / "pipelines/examples/make_example_packages.py"),
                        str(tmp / "pk")], check=True, capture_output=True)
        print(f"load average before: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores, "
              f"threads {args.threads}\n")
        print("| case | policy | status | runs | islands | FP32 share | culprit | culprit share | "
              "ratio | wall s |\n|---|---|---|---|---|---|---|---|---|---|")
        cases = [(f"example:{name}", policy, ["--model", tmp / "pk" / name]) for name, policy in EXAMPLES]
        cases += [(f"reference:tiny --fault {fault}", policy, ["--size", "tiny", "--fault", fault])
                  for fault, policy in FAULTS]
        cases += [(f"zoo:{p.name}", policy, ["--model", p]) for p in zoo_cases(tmp) for policy in ZOO_POLICIES]
        for label, policy, where in cases:
            if args.only not in label:
                continue
            if where[0] == "--model":
                framegate(build, "golden", "make", *where, "--golden-dir", goldens, threads=args.threads)
            else:
                framegate(build, "golden", "make", *where, "--golden-dir", goldens, threads=args.threads)
            print(advise(build, label, policy, where, goldens, args), flush=True)
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
