#!/usr/bin/env python3
"""FP16 emulation against real FP16: for every package x seed, runs `framegate generate`
under fp32 (the golden), fp16 (native FP16; needs a LibTorch with CPU FP16, 2.2 or later)
and fp16-emulated, then `framegate metrics` between them, and writes one JSON line per
(package, seed) and a Markdown table per package.

  bench/fp16_crosscheck.py --framegate BUILD/bin/framegate --out DIR [--seeds 0-2] \
      [--jobs 2] PACKAGE_DIR...

Each PACKAGE_DIR is a package (it holds model.toml) or a folder of packages
(pipelines/examples/make_example_packages.py DIR, make_zoo_packages.py DIR). Needs numpy
only (no torch), so it runs with Debian 13's python3 in the libtorch2 chroot:

  ci/libtorch2.sh --exec /usr/bin/python3 bench/fp16_crosscheck.py \
      --framegate /var/tmp/framegate-build/bin/framegate --out /var/tmp/x/out PKGS...

--kernels (needs torch, e.g. Debian 13's python3-torch in the chroot) instead compares each
CPU FP16 op this LibTorch has with the same op computed in float32 on the FP16 inputs and
rounded once (what fp16-emulated does with an op's output), and prints the result.

A run's status: ERROR(dtype) when generate exits non-zero with a dtype mismatch (ERROR for
another error), with the module and op it names, NONFINITE when its frames hold a NaN or
an Inf (with where `framegate check` finds the first NaN/Inf), else finite; native and
emulated agree when status and place are the same. PSNRs are the minimum over
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
        if (p / "model.toml").exists():
            found.append(p)
        else:
            found += sorted(d for d in p.iterdir() if (d / "model.toml").exists())
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


def first_nonfinite(framegate: str, package: pathlib.Path, seed: int, out: pathlib.Path) -> Dict[str, tuple]:
    """Where fp16 and fp16-emulated first hold a NaN or Inf (framegate check's first_nonfinite:
    ("module (op)", step)), for a package and seed where both are NONFINITE."""
    goldens = out / ".goldens"
    common = ["--model", str(package), "--seed", str(seed), "--golden-dir", str(goldens), "--threads", "1"]
    subprocess.run([framegate, "golden", "make", *common], capture_output=True, text=True)
    r = subprocess.run([framegate, "check", *common, "--policy", "fp16,fp16-emulated", "--json", "-"],
                       capture_output=True, text=True)
    try:
        cells = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {}
    cells = cells.get("cells", cells) if isinstance(cells, dict) else cells
    places: Dict[str, tuple] = {}
    for cell in cells:
        first = cell.get("first_nonfinite") or {}
        if first.get("found"):
            places[cell["policy"]] = (f"{first.get('module')} ({first.get('op') or 'module output'})", first.get("step"))
    return places


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
    if native["status"] == emulated["status"] == "NONFINITE":
        places = first_nonfinite(framegate, package, seed, out)
        for policy, run in (("fp16", native), ("fp16-emulated", emulated)):
            run["where"], run["step"] = places.get(policy, (None, None))
    row["status_agree"] = all(native.get(k) == emulated.get(k) for k in ("status", "where", "step"))
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


def compare_kernels() -> None:
    import torch  # only here: the cross-check itself needs numpy only
    import torch.nn.functional as F

    torch.manual_seed(0)
    torch.set_num_threads(1)
    r = torch.randn

    def compare(name, f, *xs):
        h = [x.half() for x in xs]
        native, once = f(*h), f(*[x.float() for x in h]).half()
        same = ((native == once) | (native.isnan() & once.isnan())).float().mean().item()
        ulp = ((native.float() - once.float()).abs() / (once.float().abs().clamp_min(6e-5) * 2**-10)).max().item()
        print(f"{name:12s} {native.dtype}: {same * 100:6.2f} % bit-identical to FP32 rounded once, "
              f"at most {ulp:.2f} ulp apart, max |diff| {(native.float() - once.float()).abs().max().item():.2e}")

    compare("mm", torch.mm, r(64, 1024), r(1024, 64))
    compare("linear", F.linear, r(8, 320), r(256, 320), r(256))
    compare("bmm", torch.bmm, r(4, 64, 128), r(4, 128, 64))
    compare("conv2d", lambda x, w: F.conv2d(x, w, padding=1), r(1, 32, 16, 16), r(32, 32, 3, 3))
    compare("conv3d", lambda x, w: F.conv3d(x, w, padding=1), r(1, 16, 4, 8, 8), r(16, 16, 3, 3, 3))
    compare("softmax", lambda x: torch.softmax(x, -1), r(64, 256) * 4)
    compare("layer_norm", lambda x: F.layer_norm(x, (256,)), r(64, 256) * 3 + 1)
    compare("group_norm", lambda x: F.group_norm(x, 8), r(2, 32, 16, 16) * 3 + 1)
    compare("gelu", F.gelu, r(4096) * 3)
    compare("silu", F.silu, r(4096) * 3)
    compare("exp", torch.exp, r(4096) * 3)
    compare("sum", lambda x: x.sum(-1), r(64, 1024))
    compare("mean", lambda x: x.mean(-1), r(64, 1024))
    compare("add", torch.add, r(4096), r(4096))
    q, k, v = (r(1, 2, 64, 32).half() for _ in range(3))
    native = F.scaled_dot_product_attention(q, k, v).float()
    once = F.scaled_dot_product_attention(q.float(), k.float(), v.float()).half().float()
    scores = (q.float() @ k.float().transpose(-1, -2)).half().float() * 32**-0.5
    stepwise = (torch.softmax(scores.half().float(), -1).half().float() @ v.float()).half().float()
    for name, ref in (("FP32 rounded once", once), ("the math path rounding each intermediate", stepwise)):
        print(f"sdpa: {(native == ref).float().mean().item() * 100:.2f} % bit-identical to {name}, "
              f"max |diff| {(native - ref).abs().max().item():.2e} (outputs up to {once.abs().max().item():.2f})")
    k64 = torch.full((1, 64), 100.0).half()
    v64 = torch.cat([torch.full((32, 1), 100.0), torch.full((32, 1), -100.0)]).half()
    print(f"mm whose partial sums pass 65504 and whose result is 0: {torch.mm(k64, v64).item()} "
          "(an FP16 running sum gives inf or nan)")
    print(f"sum of 64 x 2000.0 (128000 > 65504): {torch.full((64,), 2000.0).half().sum().item()}; "
          f"softmax([12, 0]) (exp(12) > 65504): {torch.softmax(torch.tensor([12.0, 0.0]).half(), 0).tolist()}")


def main() -> int:
    if "--kernels" in sys.argv[1:]:
        compare_kernels()
        return 0
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
