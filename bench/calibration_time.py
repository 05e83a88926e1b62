#!/usr/bin/env python3
"""Calibration time per model: `framegate calibrate` (the default policies fp32, bf16,
fp16-emulated, fp8e4m3-bf16, fp8e5m2-bf16; seeds 0-2; the FP32 noise floor on every CPU
kernel path) on each example package and on the tiny reference model, wall time and what
it ran, as a table. Goldens are made into a fresh folder (their time is part of a first
calibration and is shown apart).

  /usr/bin/python3 bench/calibration_time.py [--framegate build/bin/framegate]
      [--packages clean,f3-ff-overflow] [--seeds 0-2] [--threads 0]
"""
import argparse
import json
import resource
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def cpu_seconds() -> float:
    """User + system CPU time of the finished child processes (the wall time depends on
    what else the machine runs)."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framegate", default=str(ROOT / "build" / "bin" / "framegate"))
    ap.add_argument("--packages", default="clean,f3-ff-overflow")
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--threads", default="0")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        names = [n for n in args.packages.split(",") if n]
        subprocess.run([sys.executable, str(ROOT / "pipelines" / "examples" / "make_example_packages.py"),
                        str(tmp / "packages"), "--only", ",".join(names)], check=True, capture_output=True)
        models = [(n, ["--model", str(tmp / "packages" / n)]) for n in names] + [("reference tiny", ["--size", "tiny"])]
        for name, model in models:
            goldens = tmp / ("goldens-" + name.replace(" ", "-"))
            out = tmp / "cal.json"
            cpu0 = cpu_seconds()
            start = time.monotonic()
            r = subprocess.run([args.framegate, "calibrate", *model, "--seeds", args.seeds, "--golden-dir",
                                str(goldens), "--threads", args.threads, "--json", str(out)],
                               capture_output=True, text=True)
            wall = time.monotonic() - start
            cpu = cpu_seconds() - cpu0
            if r.returncode not in (0, 1):
                print(r.stderr, file=sys.stderr)
                return 2
            cal = json.loads(out.read_text())
            # A second calibration finds the goldens: the time a recalibration takes.
            start = time.monotonic()
            subprocess.run([args.framegate, "calibrate", *model, "--seeds", args.seeds, "--golden-dir",
                            str(goldens), "--threads", args.threads, "--json", str(out)],
                           capture_output=True, text=True)
            again = time.monotonic() - start
            measured = sum(1 for p in cal["policies"].values() if not p["not_calibrated"])
            rows.append((name, wall, cpu, again, len(cal["noise_floor"]["runs"]), len(cal["policies"]), measured,
                         len(cal["goldens_made"])))
    print("| model | first calibration: wall s (CPU s, goldens made) | recalibration wall s | FP32 reruns | "
          "policies (measured) | policy x seed runs |")
    print("|---|---|---|---|---|---|")
    seeds = len(cal["policies"][next(iter(cal["policies"]))]["seeds"])
    for name, wall, cpu, again, reruns, policies, measured, made in rows:
        print(f"| {name} | {wall:.1f} ({cpu:.1f}, {made}) | {again:.1f} | {reruns} | {policies} ({measured}) | "
              f"{policies * seeds} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
