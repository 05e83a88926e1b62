#!/usr/bin/env python3
"""FP16 emulation against real FP16: for every package x seed, runs `framegate generate`
under fp32 (the golden), fp16 (native FP16; needs a LibTorch with CPU FP16, 2.2 or later)
and fp16-emulated, then `framegate metrics` between them, and writes one JSON line per
(package, seed) and a Markdown table per package.

  bench/fp16_crosscheck.py --framegate BUILD/bin/framegate --out DIR [--seeds 0-2] \
      [--jobs 2] PACKAGE_DIR...

Each PACKAGE_DIR is a package (it holds manifest.json) or a folder of packages
(pipelines/examples/make_example_packages.py DIR, make_zoo_packages.py DIR). Needs numpy
only (no torch), so it runs with Debian 13's python3 in the libtorch2 chroot:

  ci/libtorch2.sh --exec /usr/bin/python3 bench/fp16_crosscheck.py \
      --framegate /var/tmp/framegate-build/bin/framegate --out /var/tmp/x/out PKGS...

A run's status: ERROR(dtype) when generate exits non-zero with a dtype mismatch (ERROR for
another error), with the module and op it names, NONFINITE when its frames hold a NaN or
an Inf, else finite; native and emulated agree when status and place are the same. PSNRs are the minimum over
frames (framegate metrics' min_psnr), "nan" where a side is not finite, and the table
gives the worst (lowest) over the seeds.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import pathlib
import re
import subprocess
import sys
import time
from typing import Dict, List, Optional

import numpy as np

POLICIES = ["fp32", "fp16", "fp16-emulated"]
PAIRS = [("fp16", "fp32"), ("fp16-emulated", "fp32"), ("fp16-emulated", "fp16")]  # (candidate, reference)
DTYPE_ERROR = re.compile(r"same dtype|should be the same|expected scalar type|dtype", re.IGNORECASE)
ERROR_PLACE = re.compile(r"\(in ([^,()]+), ([^,()]+)\)$")  # "... (in denoiser.embed.0, aten::linear)"


def parse_seeds(text: str) -> List[int]:
    seeds: List[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        seeds += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return seeds


def find_packages(paths: List[str]) -> List[pathlib.Path]:
    found: List[pathlib.Path] = []
    for p in map(pathlib.Path, paths):
        if (p / "manifest.json").exists():
            found.append(p)
        else:
            found += sorted(d for d in p.iterdir() if (d / "manifest.json").exists())
    return found


def generate(framegate: str, package: pathlib.Path, seed: int, policy: str, out: pathlib.Path) -> dict:
    cmd = [framegate, "generate", "--model", str(package), "--seed", str(seed), "--policy", policy,
           "--threads", "1", "--out", str(out)]
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    run = {"seconds": round(time.monotonic() - start, 2)}
    if r.returncode != 0:
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit {r.returncode}"
        run.update(status="ERROR(dtype)" if DTYPE_ERROR.search(reason) else "ERROR", reason=reason)
        place = ERROR_PLACE.search(reason)
        run["where"] = f"{place.group(1)} ({place.group(2)})" if place else None
        return run
    frames = np.load(out / "frames.npy")
    run["status"] = "finite" if np.isfinite(frames).all() else "NONFINITE"
    generation = json.loads((out / "generation.json").read_text())
    run["policy_run"] = generation.get("policy")  # the policy that ran (not a fallback)
    return run


def min_psnr(framegate: str, ref: pathlib.Path, cand: pathlib.Path) -> Optional[float]:
    r = subprocess.run([framegate, "metrics", str(ref / "frames.npy"), str(cand / "frames.npy"), "--threads", "1",
                        "--json", "-"], capture_output=True, text=True)
    if r.returncode != 0:
        return float("nan")
    value = json.loads(r.stdout).get("min_psnr")
    if value is None:
        return float("inf")  # identical frames
    return float("nan") if isinstance(value, str) else float(value)


def run_one(framegate: str, package: pathlib.Path, seed: int, out: pathlib.Path) -> dict:
    row: Dict[str, object] = {"package": package.name, "seed": seed}
    dirs = {p: out / package.name / f"seed{seed}" / p for p in POLICIES}
    runs = {p: generate(framegate, package, seed, p, dirs[p]) for p in POLICIES}
    row["runs"] = runs
    for cand, ref in PAIRS:
        key = f"psnr_{cand}_vs_{ref}"
        both_finite = runs[cand]["status"] == "finite" and runs[ref]["status"] == "finite"
        row[key] = min_psnr(framegate, dirs[ref], dirs[cand]) if both_finite else float("nan")
    native, emulated = runs["fp16"], runs["fp16-emulated"]
    row["status_agree"] = native["status"] == emulated["status"] and native.get("where") == emulated.get("where")
    return row


def db(values: List[float]) -> str:
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return "–"
    worst = min(finite)
    return "identical" if math.isinf(worst) else f"{worst:.1f}"


def statuses(rows: List[dict], policy: str) -> str:
    seen = sorted({r["runs"][policy]["status"] + (f" in {r['runs'][policy]['where']}" if r["runs"][policy].get("where")
                                                  else "") for r in rows})
    return "/".join(seen)


def markdown(rows: List[dict]) -> str:
    by_package: Dict[str, List[dict]] = {}
    for r in rows:
        by_package.setdefault(r["package"], []).append(r)
    lines = ["| package | fp16 (native) | fp16-emulated | agree | native vs fp32 (dB) | emulated vs fp32 (dB) "
             "| emulated vs native (dB) |",
             "|---|---|---|---|---|---|---|"]
    for name, group in by_package.items():
        agree = "yes" if all(r["status_agree"] for r in group) else "**no**"
        lines.append(f"| {name} | {statuses(group, 'fp16')} | {statuses(group, 'fp16-emulated')} | {agree} | "
                     f"{db([r['psnr_fp16_vs_fp32'] for r in group])} | "
                     f"{db([r['psnr_fp16-emulated_vs_fp32'] for r in group])} | "
                     f"{db([r['psnr_fp16-emulated_vs_fp16'] for r in group])} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("packages", nargs="+", help="a package folder or a folder of packages")
    ap.add_argument("--framegate", required=True)
    ap.add_argument("--out", required=True, help="folder for the frames, cells.jsonl and table.md")
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--jobs", type=int, default=2, choices=[1, 2, 3, 4])
    args = ap.parse_args()

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cells = [(p, s) for p in find_packages(args.packages) for s in parse_seeds(args.seeds)]
    rows: List[dict] = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool, open(out / "cells.jsonl", "w") as log:
        futures = [pool.submit(run_one, args.framegate, p, s, out) for p, s in cells]
        for f in concurrent.futures.as_completed(futures):
            row = f.result()
            rows.append(row)
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(f"{row['package']} seed {row['seed']}: fp16 {row['runs']['fp16']['status']}, "
                  f"emulated {row['runs']['fp16-emulated']['status']}", file=sys.stderr)
    order = {(p.name, s): i for i, (p, s) in enumerate(cells)}
    rows.sort(key=lambda r: order[(r["package"], r["seed"])])
    table = markdown(rows)
    (out / "table.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
