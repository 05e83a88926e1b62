#!/usr/bin/python3
"""Default tolerance bounds from a population of models, with leave-one-out validation.

  bench/calibrate_population.py --lines SWEEP.jsonl [--lines MORE.jsonl]
      [--reference tiny --framegate build/bin/framegate] [--markdown OUT.md] [--toml OUT.toml]

SWEEP.jsonl is what bench/zoo_sweep.py writes (one line per package x policy x seed, with
the check's metrics). --reference also measures framegate's own reference model (seeds of
the sweep), as one more design. Which packages are clean, and what each defect package
should get, comes from pipelines/examples/make_zoo_packages.py --list.

The rule (the one checks/tolerances.toml states): over every clean design and seed, the
worst value of each metric, then a margin: PSNR 6 dB below the worst (2x the RMS error),
error metrics (max_abs, rel_l2, temporal_rel_l2) 4x the worst, similarities (SSIM, latent
cosine) 4x the worst distance from 1. Fault and defect models never widen a bound.

Leave-one-out: for each clean design, the bounds fitted on the others must hold for it
(every seed, every metric): a bound must hold for a model it was not fitted on. The
defect packages are then judged by the bounds fitted on all clean designs, to show that
the bounds stay strict (a defect the table expects to FAIL must fail a bound).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = ["fp32", "bf16", "fp16-emulated", "fp8e4m3-bf16", "fp8e5m2-bf16"]
# fp32 against its own golden on one machine is exact: its bound is the cross-device
# noise allowance (checks/tolerances.toml), and a model's own noise floor is what
# `framegate calibrate` measures. It is judged here, not fitted.
FITTED = [p for p in POLICIES if p != "fp32"]
# (metric in the sweep lines, profile key, kind): kind "psnr" (floor, dB), "distance"
# (similarity: floor on 1 - distance), "error" (ceiling).
METRICS = [
    ("min_psnr", "min_psnr", "psnr"),
    ("min_ssim", "min_ssim", "distance"),
    ("max_abs", "max_abs", "error"),
    ("rel_l2", "max_rel_l2", "error"),
    ("temporal_rel_l2", "max_temporal_rel_l2", "error"),
    ("latent_cosine", "min_latent_cosine", "distance"),
]
PSNR_MARGIN_DB = 6.0
JUDGED = ("PASS", "FAIL")  # statuses decided by the bounds (the others by their own checks)
ERROR_FACTOR = 4.0


def number(value) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) else None


def worst_of(cells: List[dict], metric: str, kind: str) -> Optional[float]:
    """The worst value of `metric` over `cells` (None when every value is exact)."""
    values = [number(c.get(metric)) for c in cells]
    values = [v for v in values if v is not None and not (kind == "psnr" and math.isinf(v))]
    if not values:
        return None
    if kind == "error":
        return max(values)
    return min(values)


def round_sig(x: float, up: bool) -> float:
    """x to 3 significant digits, rounded away from the passing side's edge."""
    if x == 0 or math.isinf(x):
        return x
    scale = 10 ** (math.floor(math.log10(abs(x))) - 2)
    return (math.ceil if up else math.floor)(x / scale) * scale


def bound_from(worst: Optional[float], kind: str) -> Optional[float]:
    if worst is None:
        return None
    if kind == "psnr":
        return math.floor((worst - PSNR_MARGIN_DB) * 10) / 10
    if kind == "error":
        return round_sig(worst * ERROR_FACTOR, up=True)
    distance = max(1.0 - worst, 1e-6)
    return max(0.0, 1.0 - round_sig(distance * ERROR_FACTOR, up=True))  # a similarity floor


def passes(value, bound: Optional[float], kind: str) -> bool:
    v = number(value)
    if bound is None:
        return True
    if v is None:  # null: identical to the golden (PSNR inf)
        return True
    if math.isnan(v):
        return False
    return v <= bound if kind == "error" else v >= bound


def fit(cells_by_design: Dict[str, List[dict]], designs: List[str], policy: str) -> Dict[str, float]:
    cells = [c for d in designs for c in cells_by_design[d] if c["policy"] == policy and c["status"] in JUDGED]
    bounds = {}
    for metric, key, kind in METRICS:
        b = bound_from(worst_of(cells, metric, kind), kind)
        if b is not None:
            bounds[key] = b
    return bounds


def failed_metrics(cell: dict, bounds: Dict[str, float]) -> List[str]:
    return [key for metric, key, kind in METRICS if not passes(cell.get(metric), bounds.get(key), kind)]


def zoo_table() -> Dict[str, dict]:
    out = subprocess.run([sys.executable, os.path.join(REPO, "pipelines/examples/make_zoo_packages.py"),
                          "--list"], check=True, capture_output=True, text=True).stdout
    return {p["name"]: p for p in json.loads(out)}


def reference_lines(framegate: str, size: str, seeds: List[int]) -> List[dict]:
    lines = []
    with tempfile.TemporaryDirectory() as goldens:
        for seed in seeds:
            common = ["--size", size, "--seed", str(seed), "--golden-dir", goldens, "--threads", "1"]
            subprocess.run([framegate, "golden", "make", *common], check=True, capture_output=True)
            r = subprocess.run([framegate, "check", *common, "--policy", ",".join(POLICIES), "--json", "-"],
                               capture_output=True, text=True)
            for cell in json.loads(r.stdout)["cells"]:
                m = cell.get("metrics") or {}
                lines.append({"package": f"reference-{size}", "policy": cell["policy"], "seed": seed,
                              "status": cell["status"], **{k: m.get(k) for k, _, _ in METRICS}})
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", action="append", default=[], help="bench/zoo_sweep.py output (repeatable)")
    ap.add_argument("--reference", default="", help="also measure the reference model of this size")
    ap.add_argument("--framegate", default=os.path.join(REPO, "build/bin/framegate"))
    ap.add_argument("--markdown", default="", help="write the tables here (default: stdout)")
    ap.add_argument("--toml", default="", help="write the fitted [profile.*] tables here")
    args = ap.parse_args(argv)
    lines = [json.loads(l) for path in args.lines for l in open(path) if l.strip()]
    seeds = sorted({l["seed"] for l in lines}) or [0, 1, 2, 3, 4]
    if args.reference:
        lines += reference_lines(args.framegate, args.reference, seeds)
    table = zoo_table()
    by_design: Dict[str, List[dict]] = {}
    for line in lines:
        by_design.setdefault(line["package"], []).append(line)
    clean = sorted(d for d in by_design if table.get(d, {"clean": True})["clean"])
    defects = sorted(d for d in by_design if d not in clean)
    out: List[str] = []
    fitted = {p: fit(by_design, clean, p) for p in FITTED}
    false_verdicts = [f"{c['package']} {c['policy']} seed {c['seed']}: {c['status']} {c.get('reason') or ''}".strip()
                      for d in clean for c in by_design[d] if c["status"] not in JUDGED]

    out.append(f"Clean designs ({len(clean)}): {', '.join(clean)}; seeds {seeds[0]}-{seeds[-1]}.\n")
    out.append("| policy | " + " | ".join(key for _, key, _ in METRICS) + " | leave-one-out holds |")
    out.append("|---|" + "---|" * (len(METRICS) + 1))
    for policy in FITTED:
        held, misses = 0, []
        for design in clean:
            bounds = fit(by_design, [d for d in clean if d != design], policy)
            failed = sorted({k for c in by_design[design] if c["policy"] == policy for k in failed_metrics(c, bounds)})
            if failed:
                misses.append(f"{design}: {', '.join(failed)}")
            else:
                held += 1
        cells = " | ".join(f"{fitted[policy].get(key, '-'):.6g}" if key in fitted[policy] else "-"
                           for _, key, _ in METRICS)
        out.append(f"| {policy} | {cells} | {held}/{len(clean)}" + (f" ({'; '.join(misses)})" if misses else "") + " |")

    out.append(f"\nClean cells with a status no bound decides (must be none): {len(false_verdicts)}")
    out.extend(f"- {v}" for v in false_verdicts)
    out.append("\nWorst value per clean design (PSNR dB / latent cosine), over the seeds:\n")
    out.append("| design | " + " | ".join(POLICIES) + " |")
    out.append("|---|" + "---|" * len(POLICIES))
    for design in clean:
        row = []
        for policy in POLICIES:
            cells = [c for c in by_design[design] if c["policy"] == policy and c["status"] in JUDGED]
            if not cells:
                row.append("-")
                continue
            psnr = worst_of(cells, "min_psnr", "psnr")
            cos = worst_of(cells, "latent_cosine", "distance")
            row.append("exact" if psnr is None else f"{psnr:.1f} / {cos:.5f}")
        out.append(f"| {design} | " + " | ".join(row) + " |")

    out.append("\nDefect packages under the fitted bounds (finite cells only; NONFINITE, ERROR and "
               "BROKEN_FRAMES come from their own checks):\n")
    out.append("| defect | policy | expected | seeds failing a bound | worst PSNR (dB) | bounds failed |")
    out.append("|---|---|---|---|---|---|")
    for design in defects:
        expected = table.get(design, {}).get("expected", {})
        for policy in FITTED:
            cells = [c for c in by_design[design] if c["policy"] == policy and c["status"] in JUDGED]
            if not cells:
                continue
            failing = [c for c in cells if failed_metrics(c, fitted[policy])]
            keys = sorted({k for c in failing for k in failed_metrics(c, fitted[policy])})
            psnr = worst_of(cells, "min_psnr", "psnr")
            out.append(f"| {design} | {policy} | {expected.get(policy, '')} | {len(failing)}/{len(cells)} | "
                       f"{'exact' if psnr is None else f'{psnr:.1f}'} | {', '.join(keys)} |")
    text = "\n".join(out) + "\n"
    if args.markdown:
        open(args.markdown, "w").write(text)
    else:
        sys.stdout.write(text)
    if args.toml:
        with open(args.toml, "w") as f:
            for policy in FITTED:
                f.write(f"[profile.{policy}]\n")
                for _, key, _ in METRICS:
                    if key in fitted[policy]:
                        f.write(f"{key} = {fitted[policy][key]:.6g}\n")
                f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
