#!/usr/bin/python3
"""Makes the frame-metric reference vectors in tests/data/metric-vectors/ with scikit-image.

Each case is a folder with ref.npy, cand.npy (float32 [T, H, W, 3], values in [0, 1]) and
expected.json: per frame, what scikit-image computes
  psnr: peak_signal_noise_ratio(ref[t], cand[t], data_range=1.0), null when identical (inf)
  ssim: structural_similarity(ref[t], cand[t], data_range=1.0, channel_axis=-1,
        gaussian_weights=True, sigma=1.5, use_sample_covariance=False)
and over the video max_abs = max |cand - ref|, rel_l2 = ||cand - ref|| / ||ref||.
framegate's metrics (checks/frame_metrics.h) must agree to 1e-4 (PSNR: 1e-3 dB).

Deterministic (fixed seeds). Run with Debian's interpreter, which has numpy and skimage:
  /usr/bin/python3 tests/data/make_metric_vectors.py [OUT_DIR]
"""
import json
import math
import pathlib
import sys

import numpy as np
from scipy.ndimage import gaussian_filter
import skimage
from skimage.metrics import peak_signal_noise_ratio, structural_similarity


def smooth_video(rng, frames, height, width):
    """Moving smooth patterns in [0.1, 0.9]: like decoded frames, not white noise."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    video = np.empty((frames, height, width, 3), np.float64)
    phases = rng.uniform(0, 2 * math.pi, size=(3, 3))
    for t in range(frames):
        for c in range(3):
            a, b, p = phases[c]
            video[t, :, :, c] = (np.sin(x / (4 + c) + a + 0.3 * t) * np.cos(y / (5 + c) + b) +
                                 0.3 * np.sin((x + y) / 3 + p))
    video += 0.05 * rng.standard_normal(video.shape)
    lo, hi = video.min(), video.max()
    return (0.1 + 0.8 * (video - lo) / (hi - lo)).astype(np.float32)


def cases():
    rng = np.random.default_rng(20261124)
    ref = smooth_video(rng, 2, 24, 64)
    yield "identical", ref, ref.copy()
    ref = smooth_video(rng, 4, 32, 48)
    cand = np.clip(ref + rng.normal(0, 0.01, ref.shape), 0, 1).astype(np.float32)
    yield "noise_small", ref, cand
    ref = smooth_video(rng, 3, 40, 40)
    cand = gaussian_filter(ref, sigma=(0, 1.0, 1.0, 0)).astype(np.float32)
    yield "blur", ref, cand


def expected(ref, cand):
    frames = []
    for r, c in zip(ref, cand):
        with np.errstate(divide="ignore"):  # identical frames: inf
            psnr = peak_signal_noise_ratio(r, c, data_range=1.0)
        ssim = structural_similarity(r, c, data_range=1.0, channel_axis=-1, gaussian_weights=True,
                                     sigma=1.5, use_sample_covariance=False)
        frames.append({"psnr": None if math.isinf(psnr) else float(psnr), "ssim": float(ssim)})
    diff = cand.astype(np.float64) - ref.astype(np.float64)
    return {"scikit_image": skimage.__version__, "frames": frames,
            "max_abs": float(np.abs(diff).max()),
            "rel_l2": float(np.linalg.norm(diff) / np.linalg.norm(ref.astype(np.float64)))}


def main():
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else (
        pathlib.Path(__file__).resolve().parent / "metric-vectors")
    for name, ref, cand in cases():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "ref.npy", ref)
        np.save(folder / "cand.npy", cand)
        (folder / "expected.json").write_text(json.dumps(expected(ref, cand), indent=1) + "\n")
        print(f"{folder}: {ref.shape}")


if __name__ == "__main__":
    main()
