#!/usr/bin/env python3
"""Writes a tiny TorchScript model package for the C++/Python sampler cross-check.

  make_crosscheck_package.py OUT_DIR [--sampler ddim|euler] [--steps N] [--guidance G]

OUT_DIR/model.toml, OUT_DIR/denoiser.pt and OUT_DIR/decoder.pt follow the package contract
in docs/architecture.md. The weights are fixed (torch.manual_seed), so the package is the same
every time. Both modules return the dtype they are given (the timesteps stay float32; the
timestep embedding is computed in float32 and then cast to the latents' dtype), so the
package also runs after the C++ side casts it to bf16.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor, nn

CHANNELS, FRAMES, HEIGHT, WIDTH = 4, 8, 8, 8
TOKENS, DIM = 4, 16
HIDDEN = 16
TEMB = 16
WEIGHT_SEED = 20240611


class TinyDenoiser(nn.Module):
    """forward(x [B,C,T,h,w], t [B] float32, cond [B,L,D]) -> eps [B,C,T,h,w]."""

    def __init__(self) -> None:
        super().__init__()
        self.temb_dim = TEMB
        self.attn_scale = 1.0 / math.sqrt(HIDDEN)
        self.conv_in = nn.Conv3d(CHANNELS, HIDDEN, kernel_size=3, padding=1)
        self.time_mlp = nn.Sequential(nn.Linear(TEMB, HIDDEN), nn.SiLU(), nn.Linear(HIDDEN, HIDDEN))
        self.cond_pool = nn.Linear(DIM, HIDDEN)   # mean-pooled conditioning, added
        self.to_q = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.to_k = nn.Linear(DIM, HIDDEN, bias=False)
        self.to_v = nn.Linear(DIM, HIDDEN, bias=False)
        self.norm = nn.GroupNorm(4, HIDDEN)
        self.conv_out = nn.Conv3d(HIDDEN, CHANNELS, kernel_size=(1, 3, 3), padding=(0, 1, 1))

    def timestep_embedding(self, t: Tensor) -> Tensor:
        half = self.temb_dim // 2
        freqs = torch.exp(torch.arange(half, dtype=torch.float32, device=t.device)
                          * (-math.log(10000.0) / half))
        args = t.to(torch.float32)[:, None] * freqs[None, :]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=1)  # [B, TEMB] float32

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        b, c, frames, height, width = x.shape
        h = self.conv_in(x)                                            # [B, H, T, h, w]
        temb = self.time_mlp(self.timestep_embedding(t).to(x.dtype))   # [B, H]
        pooled = self.cond_pool(cond.mean(dim=1))                      # [B, H]
        h = h + (temb + pooled)[:, :, None, None, None]
        h = F.silu(self.norm(h))
        # Cross-attention of every latent position over the conditioning tokens.
        q = self.to_q(h.flatten(2).transpose(1, 2))                    # [B, N, H]
        k = self.to_k(cond)                                            # [B, L, H]
        v = self.to_v(cond)                                            # [B, L, H]
        attn = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * self.attn_scale, dim=-1)
        mixed = torch.bmm(attn, v).transpose(1, 2).reshape(b, -1, frames, height, width)
        h = h + mixed
        return x + 0.5 * self.conv_out(F.silu(h))


class TinyDecoder(nn.Module):
    """forward(z [B,C,T,h,w]) -> RGB [B,3,T,2h,2w] in [-1, 1]."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_in = nn.Conv3d(CHANNELS, HIDDEN, kernel_size=(1, 3, 3), padding=(0, 1, 1))
        self.conv_out = nn.Conv3d(HIDDEN, 3, kernel_size=(1, 3, 3), padding=(0, 1, 1))

    def forward(self, z: Tensor) -> Tensor:
        h = F.silu(self.conv_in(z))
        h = F.interpolate(h, scale_factor=(1.0, 2.0, 2.0), mode="nearest")
        return torch.tanh(self.conv_out(h))


def write_package(out_dir: str, sampler: str = "ddim", steps: int = 6,
                  guidance: float = 3.0) -> str:
    if sampler not in ("ddim", "euler"):
        raise ValueError(f"sampler must be ddim or euler, not {sampler!r}")
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(WEIGHT_SEED)
    denoiser = TinyDenoiser().eval()
    decoder = TinyDecoder().eval()
    torch.jit.script(denoiser).save(os.path.join(out_dir, "denoiser.pt"))
    torch.jit.script(decoder).save(os.path.join(out_dir, "decoder.pt"))
    with open(os.path.join(out_dir, "model.toml"), "w") as f:
        f.write(f'name = "crosscheck-{sampler}"\n\n'
                f"[latent]\nchannels = {CHANNELS}\nframes = {FRAMES}\n"
                f"height = {HEIGHT}\nwidth = {WIDTH}\n\n"
                f"[cond]\ntokens = {TOKENS}\ndim = {DIM}\n\n"
                f'[sampler]\nkind = "{sampler}"\nsteps = {int(steps)}\n'
                f"guidance = {float(guidance)!r}\n")
    return out_dir


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--sampler", choices=["ddim", "euler"], default="ddim")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--guidance", type=float, default=3.0)
    args = parser.parse_args(argv)
    write_package(args.out_dir, args.sampler, args.steps, args.guidance)
    print(f"wrote {args.out_dir} ({args.sampler}, {args.steps} steps, guidance {args.guidance})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
