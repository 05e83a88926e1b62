#!/usr/bin/env python3
"""Python twin of pipelines/sampler.h/.cc: the same sampler loop, the same frames.

Keep this file in step with sampler.cc. Every tensor expression below is written with the
same operations, operands and order as its C++ counterpart (PyTorch and LibTorch run the
same ATen kernels), and every scalar is computed in float64 like the C++ doubles, so on the
CPU with one thread the frames agree with `framegate generate` to a few float32 ulps.

  Schedule: 1000 training steps, betas = linspace(sqrt(0.00085), sqrt(0.012), 1000)^2,
  alpha_bar = cumprod(1 - betas); timesteps t_i = round(999 * (S - 1 - i) / (S - 1))
  (t_0 = 999 for S = 1), rounding halves away from zero (std::llround).
  DDIM (eta = 0), Euler, and classifier-free guidance with one batch [uncond; cond],
  uncond = zeros.

Usage: python_sampler.py --model DIR --seed N --out DIR [--threads 1]
writes OUT/frames.npy (float32 [T, H, W, 3] in [0, 1]) and OUT/latents.npy.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import tomllib
from typing import Callable, List, Tuple

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seeded_noise import SeededNormal, StreamOf  # noqa: E402

TRAIN_STEPS = 1000


@dataclasses.dataclass(frozen=True)
class Geometry:
    """LatentGeometry: latent [B, C, T, h, w] and conditioning [B, L, D]."""

    channels: int = 4
    frames: int = 8
    height: int = 16
    width: int = 16
    cond_tokens: int = 8
    cond_dim: int = 64


def alphas_cumprod() -> List[float]:
    """AlphasCumprod(): [1000] float64, the same sums and products as the C++ loop."""
    alpha_bar = []
    lo, hi = math.sqrt(0.00085), math.sqrt(0.012)
    prod = 1.0
    for i in range(TRAIN_STEPS):
        root = lo + (hi - lo) * i / (TRAIN_STEPS - 1)
        prod *= 1.0 - root * root
        alpha_bar.append(prod)
    return alpha_bar


def _llround(v: float) -> int:
    """std::llround: nearest integer, halves away from zero (Python's round() is banker's)."""
    f = math.floor(abs(v))
    r = f + 1 if abs(v) - f >= 0.5 else f
    return int(r) if v >= 0 else -int(r)


def sampler_timesteps(steps: int) -> List[int]:
    """SamplerTimesteps(steps): descending."""
    return [
        TRAIN_STEPS - 1
        if steps == 1
        else _llround(float(TRAIN_STEPS - 1) * (steps - 1 - i) / (steps - 1))
        for i in range(steps)
    ]


def draw_inputs(geometry: Geometry, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """DrawInputs: the initial noise [1, C, T, h, w] and conditioning [1, L, D], float32."""
    g = geometry
    noise = SeededNormal(seed, StreamOf("noise"), [1, g.channels, g.frames, g.height, g.width])
    cond = SeededNormal(seed, StreamOf("cond"), [1, g.cond_tokens, g.cond_dim])
    return torch.from_numpy(noise), torch.from_numpy(cond)


def _guided_noise(denoiser: Callable, x: torch.Tensor, t: float, cond: torch.Tensor,
                  guidance: float) -> torch.Tensor:
    """GuidedNoise: one pass, or a CFG batch [uncond; cond] with uncond = zeros."""
    if guidance == 1.0:
        return denoiser(x, torch.full([1], t, dtype=torch.float32, device=x.device), cond)
    x_in = torch.cat([x, x], 0)
    cond_in = torch.cat([torch.zeros_like(cond), cond], 0)
    eps = denoiser(x_in, torch.full([2], t, dtype=torch.float32, device=x.device), cond_in)
    eps_u, eps_c = eps.narrow(0, 0, 1), eps.narrow(0, 1, 1)
    return eps_u + (eps_c - eps_u) * guidance


def frames_from_decoded(decoded: torch.Tensor) -> torch.Tensor:
    """FramesFromDecoded: [1, 3, T, H, W] in [-1, 1] -> [T, H, W, 3] in [0, 1]."""
    return (decoded.to(torch.float32).to("cpu").add(1.0).mul(0.5).clamp(0.0, 1.0)
            .select(0, 0).permute(1, 2, 3, 0).contiguous())


def generate(denoiser: Callable, decoder: Callable, geometry: Geometry, sampler_kind: str,
             steps: int, guidance: float, seed: int,
             dtype: torch.dtype = torch.float32) -> Tuple[np.ndarray, np.ndarray]:
    """Generate(): returns (frames [T, H, W, 3] float32, latents [1, C, T, h, w] float32)."""
    if sampler_kind not in ("ddim", "euler"):
        raise ValueError(f"sampler kind must be 'ddim' or 'euler', not {sampler_kind!r}")
    noise, cond_cpu = draw_inputs(geometry, seed)
    cond = cond_cpu.to(dtype)
    alpha_bar = alphas_cumprod()
    timesteps = sampler_timesteps(steps)
    n = len(timesteps)

    def sigma(i: int) -> float:  # sigma_i, with sigma_n = 0
        if i >= n:
            return 0.0
        a = alpha_bar[timesteps[i]]
        return math.sqrt((1.0 - a) / a)

    x = noise.to(dtype)
    if sampler_kind == "euler":
        x = x * math.sqrt(sigma(0) * sigma(0) + 1.0)
    for i in range(n):
        t = float(timesteps[i])
        if sampler_kind == "ddim":
            a = alpha_bar[timesteps[i]]
            a_prev = alpha_bar[timesteps[i + 1]] if i + 1 < n else 1.0
            eps = _guided_noise(denoiser, x, t, cond, guidance)
            x0 = (x - eps * math.sqrt(1.0 - a)) / math.sqrt(a)
            x = x0 * math.sqrt(a_prev) + eps * math.sqrt(1.0 - a_prev)
        else:
            s = sigma(i)
            eps = _guided_noise(denoiser, x / math.sqrt(s * s + 1.0), t, cond, guidance)
            x = x + eps * (sigma(i + 1) - s)

    decoded = decoder(x)
    latents = x.to(torch.float32).to("cpu")
    decoded = decoded.to(torch.float32).to("cpu").contiguous()
    frames = frames_from_decoded(decoded)
    return frames.detach().numpy().copy(), latents.detach().numpy().copy()


# --- model packages ------------------------------------------------------------------------

@dataclasses.dataclass
class Package:
    name: str
    geometry: Geometry
    sampler_kind: str
    steps: int
    guidance: float
    denoiser: torch.jit.ScriptModule
    decoder: torch.jit.ScriptModule


def read_manifest(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "model.toml"), "rb") as f:
        return tomllib.load(f)


def load_package(model_dir: str) -> Package:
    """Like LoadModelPackage with the fp32 policy on the CPU, including its contract check
    (one forward of each module on zeros), so the TorchScript executors see the same calls
    in the same order as in the C++ run."""
    m = read_manifest(model_dir)
    geometry = Geometry(
        channels=int(m["latent"]["channels"]), frames=int(m["latent"]["frames"]),
        height=int(m["latent"]["height"]), width=int(m["latent"]["width"]),
        cond_tokens=int(m["cond"]["tokens"]), cond_dim=int(m["cond"]["dim"]))
    s = m["sampler"]
    denoiser = torch.jit.load(os.path.join(model_dir, "denoiser.pt"), map_location="cpu")
    decoder = torch.jit.load(os.path.join(model_dir, "decoder.pt"), map_location="cpu")
    for module in (denoiser, decoder):
        module.eval()
        module.to(device="cpu", dtype=torch.float32)
    g = geometry
    x = torch.zeros([1, g.channels, g.frames, g.height, g.width])
    cond = torch.zeros([1, g.cond_tokens, g.cond_dim])
    eps = denoiser(x, torch.full([1], 999.0, dtype=torch.float32), cond)
    if eps.shape != x.shape:
        raise ValueError(f"{model_dir}/denoiser.pt: output shape {list(eps.shape)} differs "
                         f"from the input shape {list(x.shape)}")
    frames = decoder(x)
    if frames.dim() != 5 or frames.size(0) != 1 or frames.size(1) != 3 or frames.size(2) != g.frames:
        raise ValueError(f"{model_dir}/decoder.pt: output shape {list(frames.shape)} is not "
                         f"[1, 3, {g.frames}, H, W]")
    return Package(name=str(m["name"]), geometry=geometry, sampler_kind=str(s["kind"]),
                   steps=int(s["steps"]), guidance=float(s["guidance"]),
                   denoiser=denoiser, decoder=decoder)


def generate_package(model_dir: str, seed: int, sampler_kind: str | None = None,
                     steps: int | None = None,
                     guidance: float | None = None) -> Tuple[np.ndarray, np.ndarray]:
    p = load_package(model_dir)
    return generate(p.denoiser, p.decoder, p.geometry, sampler_kind or p.sampler_kind,
                    steps or p.steps, guidance or p.guidance, seed)


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="TorchScript model package folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--sampler", choices=["ddim", "euler"], default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--guidance", type=float, default=None)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = parser.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    frames, latents = generate_package(args.model, args.seed, args.sampler, args.steps,
                                       args.guidance)
    os.makedirs(args.out, exist_ok=True)
    np.save(os.path.join(args.out, "frames.npy"), frames)
    np.save(os.path.join(args.out, "latents.npy"), latents)
    print(f"{args.model}: {frames.shape[0]} frames {frames.shape[2]}x{frames.shape[1]} "
          f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
