"""A synthetic framegate run for the report tests: the run JSON (reports/json_report.h
layout, each cell in CellResultToJson form) plus golden and candidate frames as .npy.

Golden frames are a smooth gradient moving over time. Candidates: PASS = golden plus
tiny noise, FAIL = noisy frames, NONFINITE = NaN frames (the lower half of each frame),
BROKEN_FRAMES = black frames; ERROR, UNSUPPORTED, TIMEOUT and CRASH cells have no frames.
Two cells carry hostile names (a policy and a model folder with <script>) to test escaping.
"""
import hashlib
import json
import math
import os
import pathlib

import numpy as np

T, H, W = 8, 64, 64
HOSTILE_POLICY = "<script>alert('policy')</script>"
HOSTILE_MODEL = "<script>alert(\"model\")<script>"  # a folder name cannot hold '/'


def golden_frames():
    t = np.arange(T, dtype=np.float32)[:, None, None]
    y = np.linspace(0, 1, H, dtype=np.float32)[None, :, None]
    x = np.linspace(0, 1, W, dtype=np.float32)[None, None, :]
    r = 0.5 + 0.5 * np.sin(2 * math.pi * (x + t / T))
    g = 0.5 + 0.5 * np.cos(2 * math.pi * (y - t / T))
    b = (x + y) / 2 + 0 * t
    r, g, b = np.broadcast_arrays(r, g, b)  # each [T, H, W]
    return np.stack([r, g, b], axis=-1).astype(np.float32)  # [T, H, W, 3]


def cell_id(pipeline, device, policy, seed):
    canonical = (f"v1|pipeline={pipeline}|device={device}|policy={policy}|seed={seed}"
                 f"|fault=|sampler=|steps=0|guidance=0")
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def number(v):
    return None if not math.isfinite(v) else float(v)


def metrics(golden, cand):
    frames = []
    for t in range(golden.shape[0]):
        mse = float(np.mean((cand[t].astype(np.float64) - golden[t]) ** 2))
        psnr = math.inf if mse == 0 else (math.nan if math.isnan(mse) else -10 * math.log10(mse))
        ssim = math.nan if math.isnan(mse) else max(-1.0, 1.0 - 20 * mse)
        frames.append({"psnr": number(psnr), "ssim": number(ssim)})
    diff = np.abs(cand.astype(np.float64) - golden)
    psnrs = [f["psnr"] if f["psnr"] is not None else math.inf for f in frames]
    ssims = [f["ssim"] if f["ssim"] is not None else math.nan for f in frames]
    rel = float(np.linalg.norm(cand - golden) / np.linalg.norm(golden))
    return {"frames": frames, "min_psnr": number(min(psnrs)), "mean_ssim": number(float(np.mean(ssims))),
            "min_ssim": number(float(np.min(ssims))), "max_abs": number(float(diff.max())),
            "rel_l2": number(rel), "temporal_rel_l2": number(rel / 2), "latent_cosine": 0.999}


def health(defect="none", first_step=-1, nan_frames=False):
    return {"step_latents": [{"nan": (4096 if first_step >= 0 and s >= first_step else 0), "inf": 0}
                             for s in range(8)],
            "first_nonfinite_step": first_step,
            "decoded": {"nan": T * H * W * 3 // 2 if nan_frames else 0, "inf": 0},
            "frames": [defect] * T, "defect": defect, "defect_frames": T if defect != "none" else 0}


def cell(status, device, policy, *, model_dir="", seed=0, reason="", error_class="", metrics=None,
         defect="none", first=None, golden="", artifacts="", timings=(1.20, 1.25, 1.22), probes=()):
    pipeline = "reference:tiny" if not model_dir else "model:" + os.path.basename(model_dir)
    result = {
        "cell_id": cell_id(pipeline, device, policy, seed), "pipeline": pipeline,
        "size": None if model_dir else "tiny", "model_dir": model_dir, "device": device,
        "policy": policy, "policy_used": policy, "seed": seed, "fault": "", "sampler": "",
        "steps": 0, "guidance": 0.0, "tolerance": "", "xfail": "", "requires": [],
        "status": status, "reason": reason, "error_class": error_class, "metrics": metrics,
        "health": health(defect, first["step"] if first else -1, defect == "nonfinite"),
        "first_nonfinite": first or {"found": False},
        "probes": [{"module": m, "dtype": "float16", "absmax": a, "overflow_fraction": 0.0,
                    "underflow_fraction": 0.001, "headroom_bits": math.log2(65504 / a)} for m, a in probes],
        "timings": {"warmup": 1, "load_seconds": 0.3, "generation_seconds": list(timings),
                    "step_seconds": [0.12] * 8, "decode_seconds": 0.2, "peak_rss_bytes": 512 << 20,
                    "peak_device_bytes": 0},
        "golden": golden, "artifacts_dir": artifacts,
        "repro": f"framegate check --size tiny --device {device} --policy '{policy}' --seed {seed}",
    }
    return result


def write_run(root, speed=1.0, hostile=True):
    """Writes <root>/run.json, <root>/golden.npy and the candidates; returns run.json's path.
    `speed` scales every timing (for benchmark comparisons); hostile=False leaves out the
    two cells with <script> names (for the documentation screenshot)."""
    root = pathlib.Path(root)
    root.mkdir(parents=True, exist_ok=True)
    gold = golden_frames()
    golden_path = root / "golden.npy"
    np.save(golden_path, gold)
    rng = np.random.default_rng(0)

    def artifacts(name, frames):
        folder = root / "artifacts" / name
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "frames.npy", frames.astype(np.float32))
        return str(folder)

    passing = np.clip(gold + rng.normal(0, 1e-3, gold.shape), 0, 1).astype(np.float32)
    noisy = np.clip(gold + rng.normal(0, 0.15, gold.shape), 0, 1).astype(np.float32)
    nan = gold.copy()
    nan[:, H // 2:, :, :] = np.nan
    black = np.zeros_like(gold)
    t = [s * speed for s in (1.20, 1.25, 1.22, 1.31, 1.18)]
    probes = [("blocks.1.mlp.fc1", 30000.0), ("blocks.0.spatial_attn.logits", 900.0)]
    cells = [
        cell("PASS", "cpu", "fp32", metrics=metrics(gold, passing), golden=str(golden_path),
             artifacts=artifacts("pass", passing), reason="", timings=t, probes=probes),
        cell("FAIL", "cpu", "bf16", metrics=metrics(gold, noisy), golden=str(golden_path),
             artifacts=artifacts("fail", noisy), reason="min_psnr 16.5 < 30", timings=t),
        cell("NONFINITE", "cpu", "fp16-emulated", metrics=metrics(gold, nan), golden=str(golden_path),
             artifacts=artifacts("nonfinite", nan), defect="nonfinite",
             first={"found": True, "step": 3, "module": "blocks.0.spatial_attn.logits", "nan": 4096, "inf": 12},
             reason="NaN at step 3 in blocks.0.spatial_attn.logits", timings=t, probes=probes),
        cell("BROKEN_FRAMES", "cpu", "fp8-e4m3", metrics=metrics(gold, black), golden=str(golden_path),
             artifacts=artifacts("black", black), defect="black", reason="black: 8 of 8 frames", timings=t),
        cell("ERROR", "cpu", "fp8-e5m2", error_class="dtype_mismatch", timings=(),
             reason="dtype_mismatch: expected scalar type Float but found Half"),
        cell("UNSUPPORTED", "cpu", "fp16", timings=(),
             reason="LibTorch 1.13 has no FP16 matmul on the CPU"),
        cell("TIMEOUT", "cuda:0", "fp32", timings=(), reason="no result after 600 s"),
        cell("CRASH", "cuda:0", "bf16", timings=(), reason="killed by signal 11 (SIGSEGV)"),
        cell("PASS", "cpu", HOSTILE_POLICY, metrics=metrics(gold, passing), golden=str(golden_path),
             artifacts=artifacts("hostile", passing), timings=t),
        cell("FAIL", "cpu", "fp32", model_dir=str(root / HOSTILE_MODEL), reason="min_psnr 12 < 30 <b>",
             timings=t),
    ]
    if not hostile:
        cells = cells[:-2]
    run = {"format": "framegate-run", "format_version": 1,
           "run": {"run_id": "20250101T020000Z-0badc0de", "started_at": "2025-01-01T02:00:00Z",
                   "finished_at": "2025-01-01T02:05:00Z", "state": "finished", "host": "nightly-01",
                   "git_sha": "e93dd37abcde", "framegate_version": "0.1.0", "libtorch_version": "1.13.1",
                   "cuda_version": "", "blas": "/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
                   "tags": "nightly", "matrix_path": "matrix/<b>nightly</b>.toml",
                   "matrix_sha256": "ab" * 32, "command": "framegate run matrix/nightly.toml", "shard": ""},
           "devices": [{"device": "cpu", "name": "Intel Xeon <i>", "capability": "avx2 avx512f",
                        "memory_bytes": 64 << 30, "driver": ""},
                       {"device": "cuda:0", "name": "NVIDIA H100", "capability": "9.0",
                        "memory_bytes": 80 << 30, "driver": "550.54"}],
           "cells": cells}
    path = root / "run.json"
    path.write_text(json.dumps(run, indent=1, allow_nan=False))
    return path


def render_tool():
    """Path of framegate_render_report, beside the framegate binary's build tree."""
    explicit = os.environ.get("FRAMEGATE_RENDER_REPORT")
    if explicit:
        return explicit
    bin_ = os.environ.get("FRAMEGATE_BIN")
    if not bin_:
        return None
    return str(pathlib.Path(bin_).resolve().parent.parent / "reports" / "framegate_render_report")
