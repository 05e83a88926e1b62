#!/usr/bin/python3
"""Times framegate's C++ frame metrics against scikit-image on the same frames.

Makes N structured frame pairs (float32 [N, H, W, 3] in [0, 1]), saves them as .npy,
then, for each repeat, times scikit-image's PSNR + SSIM over the N frames (the arguments
framegate matches, see harness/checks/frame_metrics.h) and the C++ binary bench/metrics_bench
on the same files (ComputeVideoMetrics: PSNR + SSIM per frame plus the video-level
values; compute only, files loaded before timing). Prints a markdown table (frames/s:
median and best over repeats) and the largest difference between the two
implementations' values; exits 1 if they disagree by more than 1e-4 (SSIM) or 1e-3 dB
(PSNR), 2 on a harness error.

Run with Debian's Python (numpy + scikit-image 0.19):
  /usr/bin/python3 bench/metrics_vs_skimage.py --bench-binary BUILD/bench/METRICS_BENCH
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
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

SSIM_TOL = 1e-4
PSNR_TOL_DB = 1e-3


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


def skimage_metrics(ref, cand):
    """Per-frame (psnr, ssim) lists and the wall seconds they took."""
    psnr, ssim = [], []
    start = time.perf_counter()
    for r, c in zip(ref, cand):
        with np.errstate(divide="ignore"):  # identical frames: PSNR = inf
            psnr.append(float(peak_signal_noise_ratio(r, c, data_range=1.0)))
        ssim.append(float(structural_similarity(
            r, c, data_range=1.0, channel_axis=-1, gaussian_weights=True, sigma=1.5,
            use_sample_covariance=False)))
    return psnr, ssim, time.perf_counter() - start


def cpp_metrics(binary, ref_path, cand_path, threads):
    """Runs metrics_bench once; per-frame (psnr, ssim) and its compute seconds."""
    cmd = [binary, "--ref", ref_path, "--cand", cand_path, "--repeats", "1",
           "--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        harness_error(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
    out = json.loads(proc.stdout)
    psnr = [float("inf") if p is None else p for p in out["psnr"]]
    return psnr, out["ssim"], out["seconds"][0]


def max_diff(a, b):
    """Largest |a - b|; an infinity must match exactly (else the result is inf)."""
    worst = 0.0
    for x, y in zip(a, b):
        if np.isinf(x) or np.isinf(y):
            worst = max(worst, 0.0 if x == y else float("inf"))
        else:
            worst = max(worst, abs(x - y))
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench-binary", required=True, help="path to metrics_bench")
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--height", type=int, default=256)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                        help="C++ thread counts to time (one table row each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="where the .npy files go (default: a temp dir)")
    args = parser.parse_args()
    if not os.access(args.bench_binary, os.X_OK):
        harness_error(f"{args.bench_binary} is not an executable")

    ref, cand = make_frames(args.frames, args.height, args.width, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        ref_path = os.path.join(workdir, "ref.npy")
        cand_path = os.path.join(workdir, "cand.npy")
        np.save(ref_path, ref)
        np.save(cand_path, cand)

        # Interleave the implementations in every repeat, so that load from other
        # processes on the machine hits them alike.
        seconds = {"skimage": []}
        seconds.update({t: [] for t in args.threads})
        psnr_diff = ssim_diff = 0.0
        for _ in range(args.repeats):
            sk_psnr, sk_ssim, sk_s = skimage_metrics(ref, cand)
            seconds["skimage"].append(sk_s)
            for threads in args.threads:
                psnr, ssim, s = cpp_metrics(args.bench_binary, ref_path, cand_path, threads)
                seconds[threads].append(s)
                psnr_diff = max(psnr_diff, max_diff(sk_psnr, psnr))
                ssim_diff = max(ssim_diff, max_diff(sk_ssim, ssim))

    # Median: the requested figure. Best: the least disturbed repeat, which says more on
    # a machine that other jobs share.
    fps = {k: args.frames / statistics.median(v) for k, v in seconds.items()}
    best = {k: args.frames / min(v) for k, v in seconds.items()}
    print(f"{args.frames} frame pairs of {args.height}x{args.width}x3 float32, "
          f"{args.repeats} repeats, scikit-image {skimage.__version__}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}\n")
    print("| implementation | frames/s (median) | speed-up (median) | frames/s (best) "
          "| speed-up (best) |")
    print("|---|---:|---:|---:|---:|")
    print(f"| scikit-image PSNR+SSIM | {fps['skimage']:.1f} | 1.0x | {best['skimage']:.1f} "
          "| 1.0x |")
    for threads in args.threads:
        print(f"| framegate C++ ComputeVideoMetrics, {threads} thread(s) | "
              f"{fps[threads]:.1f} | {fps[threads] / fps['skimage']:.1f}x | "
              f"{best[threads]:.1f} | {best[threads] / best['skimage']:.1f}x |")
    print(f"\nmax |PSNR diff| = {psnr_diff:.3g} dB (tolerance {PSNR_TOL_DB}), "
          f"max |SSIM diff| = {ssim_diff:.3g} (tolerance {SSIM_TOL})")
    if psnr_diff > PSNR_TOL_DB or ssim_diff > SSIM_TOL:
        print("NOT OK: the C++ metrics disagree with scikit-image. HINT: rerun with "
              f"--frames 1 --repeats 1 and compare; command: {' '.join(sys.argv)}")
        return 1
    print("OK: the C++ metrics agree with scikit-image")
    return 0


if __name__ == "__main__":
    sys.exit(main())
