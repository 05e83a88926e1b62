#!/usr/bin/env python3
"""Runs every model-zoo package x policy x seed through `framegate check` and writes one JSON
line per cell: package, policy, seed, status, reason, every scalar metric of the check JSON
(min_psnr, min_ssim, mean_ssim, max_abs, rel_l2, temporal_rel_l2, latent_cosine), the first
non-finite module/op, the error class/module, the frame defect, an FP8 cell's compute part
(min_psnr against its FP8 weights computed in FP32), the expected status from the zoo's
table (when the generator is found) and the cell's wall time.

  bench/zoo_sweep.py --framegate build/bin/framegate --zoo ZOO_DIR \
      [--seeds 0-4] [--policies fp32,bf16,...] [--policy-file F] [--jobs 2] [--out cells.jsonl]
      [--summary table.md]

ZOO_DIR holds the packages (pipelines/examples/make_zoo_packages.py ZOO_DIR); --build makes
them first. Goldens go to --golden-dir (default ZOO_DIR/.goldens), made once per package and
seed. One `check` process per (package, seed) runs all the policies (presets, or those
--policy-file defines), with --threads 1;
--jobs (1 or 2) such processes run side by side. --summary writes a Markdown table per
(package, policy): the worst min_psnr, latent_cosine and compute part over the seeds and
the statuses.
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
from typing import Dict, Iterable, List, Optional

SOURCE = pathlib.Path(__file__).resolve().parents[1]
MAKE_ZOO = SOURCE / "pipelines" / "examples" / "make_zoo_packages.py"
POLICIES = "fp32,bf16,fp16-emulated,fp8e4m3-bf16,fp8e5m2-bf16"
METRICS = ["min_psnr", "min_ssim", "mean_ssim", "max_abs", "rel_l2", "temporal_rel_l2", "latent_cosine"]


def parse_seeds(text: str) -> List[int]:
    seeds: List[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        seeds += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return seeds


def zoo_table(python: str) -> Dict[str, dict]:
    if not MAKE_ZOO.exists():
        return {}
    out = subprocess.run([python, str(MAKE_ZOO), "--list"], capture_output=True, text=True, check=True)
    return {row["name"]: row for row in json.loads(out.stdout)}


def compute_part_psnr(observed: str) -> Optional[float]:
    """An FP8 cell's compute part (its frames against its FP8 weights computed in FP32),
    from the `observed` note "compute part: min_psnr 34.58 dB against ..."."""
    found = re.search(r"compute part: min_psnr (\S+) dB", observed)
    return None if found is None else float(found.group(1))


def cell_line(package: str, seed: int, cell: dict, seconds: float, expected: Optional[dict]) -> dict:
    metrics = cell.get("metrics") or {}
    first = cell.get("first_nonfinite") or {}
    line = {"package": package, "policy": cell["policy"], "seed": seed, "status": cell["status"],
            "reason": cell.get("reason", "")}
    for key in METRICS:  # numbers; framegate writes NaN as "NaN" and an infinite PSNR as null
        line[key] = metrics.get(key)
    line.update({
        "first_nonfinite_module": first.get("module") if first.get("found") else None,
        "first_nonfinite_op": first.get("op") if first.get("found") else None,
        "error_class": cell.get("error_class") or None,
        "error_module": cell.get("error_module") or None,
        "frame_defect": (cell.get("health") or {}).get("defect"),
        "compute_part_psnr": compute_part_psnr(cell.get("observed", "")),
        "expected": (expected or {}).get(cell["policy"]),
        "seconds": round(seconds, 3),
    })
    return line


def run_one(framegate: str, zoo: pathlib.Path, goldens: pathlib.Path, package: str, seed: int,
            policies: str, policy_file: str, expected: Optional[dict]) -> List[dict]:
    model = zoo / package
    common = ["--model", str(model), "--seed", str(seed), "--golden-dir", str(goldens), "--threads", "1"]
    made = subprocess.run([framegate, "golden", "make", *common], capture_output=True, text=True)
    if made.returncode != 0:
        return [{"package": package, "policy": p, "seed": seed, "status": "HARNESS_ERROR",
                 "reason": made.stderr.strip()} for p in policies.split(",")]
    start = time.monotonic()
    more = ["--policy-file", policy_file] if policy_file else []
    r = subprocess.run([framegate, "check", *common, "--policy", policies, *more, "--json", "-"],
                       capture_output=True, text=True)
    seconds = (time.monotonic() - start) / max(1, len(policies.split(",")))
    if r.returncode not in (0, 1):
        return [{"package": package, "policy": p, "seed": seed, "status": "HARNESS_ERROR",
                 "reason": r.stderr.strip()} for p in policies.split(",")]
    return [cell_line(package, seed, c, seconds, expected) for c in json.loads(r.stdout)["cells"]]


def worst(values: List[object]) -> str:
    """The smallest value, "nan" if one is not a number, "inf" if all are null (identical)."""
    if any(isinstance(v, str) or (isinstance(v, float) and math.isnan(v)) for v in values):
        return "nan"
    numbers = [v for v in values if isinstance(v, (int, float))]
    return "inf" if not numbers else f"{min(numbers):.6g}"


def summary(lines: Iterable[dict]) -> str:
    groups: Dict[tuple, List[dict]] = {}
    for line in lines:
        groups.setdefault((line["package"], line["policy"]), []).append(line)
    out = ["| package | policy | worst min_psnr (dB) | worst latent_cosine | worst compute part (dB) | "
           "statuses (seeds) | expected |",
           "|---|---|---|---|---|---|---|"]
    for (package, policy), cells in groups.items():
        cells.sort(key=lambda c: c["seed"])
        worst_psnr = worst([c.get("min_psnr") for c in cells])
        worst_cos = worst([c.get("latent_cosine") for c in cells])
        if all(c["status"] in ("ERROR", "HARNESS_ERROR") for c in cells):
            worst_psnr = worst_cos = "-"
        counts: Dict[str, int] = {}
        for c in cells:
            counts[c["status"]] = counts.get(c["status"], 0) + 1
        statuses = ", ".join(f"{s} x{n}" for s, n in counts.items())
        parts = [c["compute_part_psnr"] for c in cells if c.get("compute_part_psnr") is not None]
        worst_part = f"{min(parts):.1f}" if parts else "-"
        out.append(f"| {package} | {policy} | {worst_psnr} | {worst_cos} | {worst_part} | {statuses} | "
                   f"{cells[0].get('expected') or ''} |")
    return "\n".join(out) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--framegate", help="the framegate binary (required unless --from-lines)")
    parser.add_argument("--zoo", help="folder of zoo packages (required unless --from-lines)")
    parser.add_argument("--build", action="store_true", help="make the zoo into --zoo first")
    parser.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 0,2,7 (default 0-4)")
    parser.add_argument("--policies", default=POLICIES, help=f"comma-separated (default {POLICIES})")
    parser.add_argument("--policy-file", default="", help="TOML file defining more policies ([policy.NAME])")
    parser.add_argument("--packages", default="", help="comma-separated (default: every folder in --zoo)")
    parser.add_argument("--jobs", type=int, default=1, choices=[1, 2], help="check processes at once")
    parser.add_argument("--golden-dir", default="", help="default: ZOO/.goldens")
    parser.add_argument("--out", default="-", help="JSON lines file, or - for stdout")
    parser.add_argument("--summary", default="", help="also write a Markdown summary table here")
    parser.add_argument("--python", default="/usr/bin/python3", help="python with torch, for the table")
    parser.add_argument("--from-lines", default="", help="only summarise this JSON lines file (no runs)")
    args = parser.parse_args(argv)
    if args.from_lines:
        lines = [json.loads(l) for l in pathlib.Path(args.from_lines).read_text().splitlines() if l]
        lines.sort(key=lambda l: l["seed"])
        text = summary(lines)
        pathlib.Path(args.summary).write_text(text) if args.summary else sys.stdout.write(text)
        return 0
    if not args.framegate or not args.zoo:
        parser.error("--framegate and --zoo are required (or --from-lines)")

    zoo = pathlib.Path(args.zoo)
    if args.build:
        subprocess.run([args.python, str(MAKE_ZOO), str(zoo)], check=True, stdout=subprocess.DEVNULL)
    table = zoo_table(args.python)
    packages = ([p for p in args.packages.split(",") if p] if args.packages else
                sorted(d.name for d in zoo.iterdir() if (d / "model.toml").exists()))
    if table:
        packages.sort(key=lambda p: list(table).index(p) if p in table else len(table))
    goldens = pathlib.Path(args.golden_dir) if args.golden_dir else zoo / ".goldens"
    seeds = parse_seeds(args.seeds)
    out = sys.stdout if args.out == "-" else open(args.out, "w")
    jobs = [(p, s) for p in packages for s in seeds]
    results: Dict[tuple, List[dict]] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_one, args.framegate, zoo, goldens, p, s, args.policies, args.policy_file,
                               (table.get(p) or {}).get("expected")): (p, s) for p, s in jobs}
        for future in concurrent.futures.as_completed(futures):
            results[futures[future]] = future.result()
            for line in results[futures[future]]:
                out.write(json.dumps(line) + "\n")
            out.flush()
    if out is not sys.stdout:
        out.close()
    if args.summary:
        ordered = [line for key in jobs for line in results[key]]
        pathlib.Path(args.summary).write_text(summary(ordered))
    return 0


if __name__ == "__main__":
    sys.exit(main())
