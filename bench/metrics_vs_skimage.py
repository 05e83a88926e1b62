#!/usr/bin/python3
"""Times `framegate metrics` against a scikit-image script doing the same PSNR + SSIM.

Makes N structured frame pairs (float32 [N, H, W, 3] in [0, 1]; default 128 of 256x256,
two 100 MB .npy files), then, in each repeat, runs side by side (interleaved, so that load
from other processes hits them alike):
  - the scikit-image script (a fresh /usr/bin/python3 process: imports, np.load of both
    files, PSNR + SSIM of every frame with the arguments framegate matches, see
    checks/frame_metrics.h), whole process, wall clock; it also reports its own
    compute time (the metric loop alone);
  - `FRAMEGATE metrics REF CAND --json FILE` for each FRAMEGATE given, whole process,
    wall clock (reading both files, PSNR/SSIM/errors/cosine, the candidate's health, the
    JSON);
  - `BINARY --version` for each --version-of BINARY: what starting that process costs
    before any metric (with LibTorch linked, mostly loading it);
  - with --bench-binary, framegate_metrics_bench (ComputeVideoMetrics in process, files
    loaded before timing) for each --threads count: the engine's own time.
Prints a markdown table of the medians (and minimums) over the repeats, the ratio to the
scikit-image script, the machine's 1-minute load average before and after, and the
largest difference between framegate's and scikit-image's per-frame values; exits 1 if
they disagree by more than 1e-4 (SSIM) or 1e-3 dB (PSNR), 2 on a harness error.

Run with Debian's Python (numpy + scikit-image 0.19):
  /usr/bin/python3 bench/metrics_vs_skimage.py --framegate build/bin/framegate \\
      --version-of build/bin/framegate --bench-binary build/bench/framegate_metrics_bench
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import skimage

SSIM_TOL = 1e-4
PSNR_TOL_DB = 1e-3

# The scikit-image side, run as its own process (its imports and file reads count, as
# framegate's do). Prints {"psnr": [...], "ssim": [...], "compute_s": s}.
SKIMAGE_SCRIPT = r'''
import json, sys, time
import numpy as np
from skimage.metrics import peak_signal_noise_ratio, structural_similarity
ref, cand = np.load(sys.argv[1]), np.load(sys.argv[2])
start = time.perf_counter()
psnr, ssim = [], []
for r, c in zip(ref, cand):
    with np.errstate(divide="ignore"):  # identical frames: PSNR = inf
        p = float(peak_signal_noise_ratio(r, c, data_range=1.0))
    psnr.append(None if p == float("inf") else p)
    ssim.append(float(structural_similarity(
        r, c, data_range=1.0, channel_axis=-1, gaussian_weights=True, sigma=1.5,
        use_sample_covariance=False)))
print(json.dumps({"psnr": psnr, "ssim": ssim, "compute_s": time.perf_counter() - start}))
'''


def harness_error(message):
    """Exits 2: the benchmark could not run (as opposed to 1: the values disagree)."""
    print(f"harness error: {message}", file=sys.stderr)
    sys.exit(2)


def make_frames(n, height, width, seed):
    """Returns (ref, cand), float32 [n, height, width, 3] in [0, 1].

    ref: smooth gradients and sinusoids plus hard-edged rectangles (structure at every
    scale, like decoded video); cand: ref degraded by a frame-dependent mix of noise,
    a one-pixel shift and a brightness offset, so PSNR and SSIM vary across frames.
    Frame 0 of cand equals ref (PSNR infinite), to exercise that path too.
    """
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    ref = np.empty((n, height, width, 3), np.float32)
    for t in range(n):
        for c in range(3):
            fx, fy = rng.uniform(0.01, 0.2, size=2)
            phase = rng.uniform(0, 2 * np.pi)
            img = 0.5 + 0.25 * np.sin(fx * x + fy * y + phase) + 0.1 * (x / width - 0.5)
            for _ in range(6):
                y0, x0 = rng.integers(0, height - 8), rng.integers(0, width - 8)
                h, w = rng.integers(4, height // 3), rng.integers(4, width // 3)
                img[y0:y0 + h, x0:x0 + w] += rng.uniform(-0.3, 0.3)
            ref[t, :, :, c] = img
    ref = np.clip(ref, 0.0, 1.0)
    cand = ref.copy()
    for t in range(1, n):
        noise = rng.normal(0.0, 0.005 * t, size=ref[t].shape).astype(np.float32)
        frame = ref[t] + noise + np.float32(0.002 * (t % 3))
        if t % 4 == 0:
            frame = np.roll(frame, 1, axis=1)
        cand[t] = np.clip(frame, 0.0, 1.0)
    return ref, cand


def timed(cmd):
    """Runs cmd; returns (wall seconds, stdout). A failure is a harness error."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        harness_error(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
    return seconds, proc.stdout


def frame_values(out):
    """Per-frame (psnr, ssim) from a JSON object whose PSNR null means infinite."""
    if "frames" in out:  # framegate metrics --json
        psnr = [f["psnr"] for f in out["frames"]]
        ssim = [f["ssim"] for f in out["frames"]]
    else:
        psnr, ssim = out["psnr"], out["ssim"]
    return [float("inf") if p is None else p for p in psnr], ssim


def max_diff(a, b):
    """Largest |a - b|; an infinity must match exactly (else the result is inf)."""
    if len(a) != len(b):
        return float("inf")
    worst = 0.0
    for x, y in zip(a, b):
        if np.isinf(x) or np.isinf(y):
            worst = max(worst, 0.0 if x == y else float("inf"))
        else:
            worst = max(worst, abs(x - y))
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framegate", nargs="+", required=True,
                        help="framegate executables to time (`metrics`, whole process)")
    parser.add_argument("--version-of", nargs="*", default=[],
                        help="executables whose `--version` to time (process start cost)")
    parser.add_argument("--bench-binary", help="framegate_metrics_bench (in-process engine)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 0],
                        help="engine thread counts for --bench-binary (0: every core)")
    parser.add_argument("--frames", type=int, default=128)
    parser.add_argument("--height", type=int, default=256)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="where the .npy files go (default: a temp dir)")
    args = parser.parse_args()
    for binary in args.framegate + args.version_of + [b for b in [args.bench_binary] if b]:
        if not os.access(binary, os.X_OK):
            harness_error(f"{binary} is not an executable")

    ref, cand = make_frames(args.frames, args.height, args.width, args.seed)
    load_before = os.getloadavg()[0]
    rows = {}  # label -> list of seconds
    compute = []  # the scikit-image script's own compute seconds
    psnr_diff = ssim_diff = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        ref_path = os.path.join(workdir, "ref.npy")
        cand_path = os.path.join(workdir, "cand.npy")
        np.save(ref_path, ref)
        np.save(cand_path, cand)
        del ref, cand
        script = os.path.join(tmp, "skimage_metrics.py")
        with open(script, "w") as f:
            f.write(SKIMAGE_SCRIPT)
        json_path = os.path.join(tmp, "metrics.json")
        sk_label = "scikit-image script (python3 + numpy + skimage), whole process"
        for _ in range(args.repeats):
            seconds, out = timed([sys.executable, script, ref_path, cand_path])
            rows.setdefault(sk_label, []).append(seconds)
            sk = json.loads(out)
            compute.append(sk["compute_s"])
            sk_psnr, sk_ssim = frame_values(sk)
            for binary in args.framegate:
                seconds, _ = timed([binary, "metrics", ref_path, cand_path, "--json", json_path])
                rows.setdefault(f"`{binary} metrics`, whole process", []).append(seconds)
                with open(json_path) as f:
                    psnr, ssim = frame_values(json.load(f))
                psnr_diff = max(psnr_diff, max_diff(sk_psnr, psnr))
                ssim_diff = max(ssim_diff, max_diff(sk_ssim, ssim))
            for binary in args.version_of:
                seconds, _ = timed([binary, "--version"])
                rows.setdefault(f"`{binary} --version` (process start, no metrics)", []).append(seconds)
            for threads in args.threads if args.bench_binary else []:
                _, out = timed([args.bench_binary, "--ref", ref_path, "--cand", cand_path,
                                "--repeats", "1", "--threads", str(threads)])
                engine = json.loads(out)
                label = (f"framegate engine in process (ComputeVideoMetrics), "
                         f"{engine['threads']} thread(s)")
                rows.setdefault(label, []).append(engine["seconds"][0])
                psnr, ssim = frame_values(engine)
                psnr_diff = max(psnr_diff, max_diff(sk_psnr, psnr))
                ssim_diff = max(ssim_diff, max_diff(sk_ssim, ssim))
    rows["scikit-image compute alone (its metric loop, in that process)"] = compute
    load_after = os.getloadavg()[0]

    sk_median = statistics.median(rows[sk_label])
    print(f"{args.frames} frame pairs of {args.height}x{args.width}x3 float32 "
          f"({args.frames * args.height * args.width * 12 / 1e6:.0f} MB a file), "
          f"{args.repeats} repeats, scikit-image {skimage.__version__}, "
          f"{os.cpu_count()} CPUs, 1-minute load average {load_before:.2f} before, "
          f"{load_after:.2f} after\n")
    print("| what | median s | min s | scikit-image script / this (medians) |")
    print("|---|---:|---:|---:|")
    for label, seconds in rows.items():
        median = statistics.median(seconds)
        print(f"| {label} | {median:.3f} | {min(seconds):.3f} | {sk_median / median:.1f}x |")
    print(f"\nmax |PSNR diff| = {psnr_diff:.3g} dB (tolerance {PSNR_TOL_DB}), "
          f"max |SSIM diff| = {ssim_diff:.3g} (tolerance {SSIM_TOL})")
    if psnr_diff > PSNR_TOL_DB or ssim_diff > SSIM_TOL:
        print("NOT OK: framegate disagrees with scikit-image. HINT: rerun with "
              f"--frames 1 --repeats 1 and compare; command: {' '.join(sys.argv)}")
        return 1
    print("OK: framegate agrees with scikit-image")
    return 0


if __name__ == "__main__":
    sys.exit(main())
