#!/usr/bin/python3
"""Prints the cost of watching a user's TorchScript package and of `framegate advise`.

1. framegate_package_bench on the example package `clean` (pipelines/examples): one cell's
   generation with the modules as loaded (plain), instrumented, watching for NaN/Inf, with
   range probes, and with range probes plus SQNR against FP32; medians of 7 repetitions,
   ratios to plain measured in the same run.
2. `framegate advise` on the failing example packages: runs needed and wall time.

Usage: bench/package_table.py [--build build] [--threads 1]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--threads", default="1")
    args = ap.parse_args()
    build = pathlib.Path(args.build)
    framegate = build / "bin" / "framegate"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        subprocess.run([sys.executable, str(REPO / "pipelines/examples/make_example_packages.py"),
                        str(tmp / "pk")], check=True, capture_output=True)
        print(f"load average before: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores, "
              f"threads {args.threads}")
        out = subprocess.run([str(build / "bench/framegate_package_bench"), "--package",
                              str(tmp / "pk/clean"), "--threads", args.threads,
                              "--benchmark_format=json"], check=True, capture_output=True, text=True)
        medians = {}
        for b in json.loads(out.stdout)["benchmarks"]:
            if b.get("aggregate_name") == "median":
                policy, mode = b["run_name"].split("/")[1:3]
                medians[(policy, mode)] = b["real_time"]
        print("\n| policy | mode | median ms | ratio to plain |\n|---|---|---|---|")
        for (policy, mode), ms in medians.items():
            print(f"| {policy} | {mode} | {ms:.2f} | {ms / medians[(policy, 'plain')]:.2f} |")
        goldens = tmp / "goldens"
        print("\n| package | policy | exit | runs | islands | wall s |\n|---|---|---|---|---|---|")
        for package, policy in (("f1-time-embed", "bf16"), ("f4-input-fp32", "bf16"),
                                ("f3-ff-overflow", "fp16-emulated")):
            subprocess.run([str(framegate), "golden", "make", "--model", str(tmp / "pk" / package),
                            "--golden-dir", str(goldens), "--threads", args.threads],
                           check=True, capture_output=True)
            start = time.monotonic()
            r = subprocess.run([str(framegate), "advise", "--model", str(tmp / "pk" / package),
                                "--policy", policy, "--golden-dir", str(goldens), "--json", "-",
                                "--threads", args.threads], capture_output=True, text=True)
            wall = time.monotonic() - start
            advice = json.loads(r.stdout)
            print(f"| {package} | {policy} | {r.returncode} | {len(advice['runs'])} | "
                  f"{', '.join(advice['islands'])} | {wall:.2f} |")
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
