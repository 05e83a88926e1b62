#!/usr/bin/env python3
"""Writes the foreign packages: video diffusion packages built as a user would build them,
not as the model zoo is (pipelines/examples/make_zoo_packages.py), to test framegate's
verdicts on models its bounds were never fitted on and its emulation never saw.

  make_foreign_packages.py OUT_DIR [--only NAME[,NAME..]]
  make_foreign_packages.py --list            # the table as JSON (no OUT_DIR)

What differs from the zoo: PyTorch's default initialisation (no trained-like scales, no
measured output gains: a hand-picked power of two on the denoisers whose latents would
otherwise grow), eps predicted directly by three of them, the modules of foreign_modules.py
(CogVideoX-, Open-Sora STDiT-, SVD- and Wan-style designs, and a Latte-style one built from
torch.nn's own transformer layers, which LibTorch runs by fused fast paths in inference; see
its docstring for the idioms), and traced twins that call `.to(x.dtype)`. torch.jit.trace records that dtype as a constant
(float32), so a traced twin feeds float32 into its time embedding's Linear under any 16-bit
policy: a real run raises "mat1 and mat2 must have the same dtype" there, and so must
framegate (ERROR dtype_mismatch in the module the table names). The scripted ones keep the
dtype and must PASS every policy (wan-traced is a twin whose trace bakes float32 in through
`.type_as` of a `.float()`). Two designs have a planted defect: latte-nn-qk-overflow's
attention logits overflow FP16 inside nn.TransformerEncoderLayer, wan-qk-overflow's inside
scaled_dot_product_attention, so fp16-emulated must be NONFINITE there (framegate computes
the fused ops by their own ops to see them: pipelines/fused_layers.h).

Run them through bench/zoo_sweep.py (--zoo OUT_DIR) for every seed;
tests/python/test_foreign_packages.py checks seed 0.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    # Same bytes every run (TorchScript writes constants in set order).
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))

import torch  # noqa: E402
from torch import Tensor, nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import foreign_modules as fm  # noqa: E402
import make_zoo_packages as zoo  # noqa: E402  (framegate's sampler in float32, for the gains)

POLICIES = zoo.POLICIES
ALL_PASS = {p: "PASS" for p in POLICIES}
BAKED_DTYPE = dict({p: "ERROR" for p in POLICIES}, fp32="PASS")


@dataclass
class Foreign:
    name: str
    what: str
    traced: bool
    latent: Tuple[int, int, int, int]  # channels, frames, height, width
    cond: Tuple[int, int]              # tokens, dim
    sampler: Tuple[str, int, float]    # kind, steps, guidance
    denoiser: Callable[[float], nn.Module]  # (output gain) -> module
    decoder: Callable[[], nn.Module]
    expected: Dict[str, str]
    error_module: Optional[str] = None  # where the ERROR cells' dtype error (or the first Inf) is
    plant: Optional[Callable[[nn.Module], None]] = None  # a defect planted in the denoiser


def _cog(g, c):
    return lambda k: fm.CogVideoX(g, c, 48, 3, 4, k)


def _stdit(g, c):
    return lambda k: fm.STDiT(g, c, 48, 3, 4, k)


def _svd(g, c):
    return lambda k: fm.SVDUNet(g, c, 32, k)


def _latte(g, c):
    return lambda k: fm.LatteNN(g, c, 32, 2, 4, k)


def _wan(g, c):
    return lambda k: fm.WanDiT(g, c, 48, 3, 4, k)


QK_GAIN = 200.0  # latte-nn-qk-overflow: logits up to ~1e5, past FP16's 65504


def _plant_qk(den: nn.Module) -> None:
    """blocks.1.spatial's q and k projections x200: one-hot attention in FP32 and BF16."""
    w = den.blocks[1].spatial.self_attn.in_proj_weight
    with torch.no_grad():
        w[:2 * w.shape[1]] *= QK_GAIN


QK_OVERFLOW = dict(ALL_PASS, **{"fp16-emulated": "NONFINITE"})


def _plant_wan_qk(den: nn.Module) -> None:
    """blocks.1.self_attn's q and k RMSNorm weights x200: logits past FP16's range inside SDPA."""
    attn = den.blocks[1].self_attn
    with torch.no_grad():
        attn.norm_q.weight *= QK_GAIN
        attn.norm_k.weight *= QK_GAIN


PACKAGES: List[Foreign] = [
    Foreign("cogvideox", "CogVideoX-style: expert adaLN, joint text+video attention with qk "
            "LayerNorm and 3D RoPE in float32, eps predicted directly; causal Conv3d decoder "
            "with float32 GroupNorms, 5D nearest upsampling, clamp", False,
            (4, 4, 8, 8), (6, 32), ("ddim", 10, 6.0), _cog((4, 4, 8, 8), (6, 32)),
            lambda: fm.CogDecoder(4, 32), dict(ALL_PASS)),
    Foreign("cogvideox-traced", "the same, traced, Euler 12 steps", True,
            (4, 4, 8, 8), (6, 32), ("euler", 12, 6.0), _cog((4, 4, 8, 8), (6, 32)),
            lambda: fm.CogDecoder(4, 32), dict(BAKED_DTYPE), "denoiser.time.0"),
    Foreign("stdit-scripted", "Open-Sora STDiT-style: spatial then temporal einsum attention "
            "with qk RMSNorm, baddbmm cross-attention, adaLN-single, float64 timestep sinusoid; "
            "SD-VAE-style decoder with mid attention and a ConvTranspose2d up", False,
            (4, 8, 8, 8), (8, 24), ("ddim", 10, 4.0), _stdit((4, 8, 8, 8), (8, 24)),
            lambda: fm.SDVAEDecoder(4, 32, 8), dict(ALL_PASS)),
    Foreign("stdit", "the same, traced, Euler 12 steps, CFG 7", True,
            (4, 8, 8, 8), (8, 24), ("euler", 12, 7.0), _stdit((4, 8, 8, 8), (8, 24)),
            lambda: fm.SDVAEDecoder(4, 32, 8), dict(BAKED_DTYPE), "denoiser.t_embed.0"),
    Foreign("svd-unet", "SVD-style UNet: spatial Conv2d + temporal Conv3d resnets with a "
            "learned mix, a GEGLU transformer with float32 LayerNorms, eps predicted directly; "
            "temporal decoder with a Conv3d time mix", False,
            (4, 4, 16, 16), (4, 32), ("euler", 10, 3.0), _svd((4, 4, 16, 16), (4, 32)),
            lambda: fm.TemporalDecoder(4, 32, 4), dict(ALL_PASS)),
    Foreign("svd-unet-traced", "the same at 6 frames of 8x8, traced, DDIM 16 steps, CFG 7.5", True,
            (4, 6, 8, 8), (4, 32), ("ddim", 16, 7.5), _svd((4, 6, 8, 8), (4, 32)),
            lambda: fm.TemporalDecoder(4, 32, 6), dict(BAKED_DTYPE), "denoiser.time.0"),
    Foreign("latte-nn", "Latte-style with torch.nn's own nn.TransformerEncoderLayer (spatial and "
            "temporal, norm_first, GELU) and nn.MultiheadAttention cross-attention; LibTorch computes "
            "them by its fused fast path in inference", False,
            (4, 4, 8, 8), (6, 32), ("ddim", 10, 5.0), _latte((4, 4, 8, 8), (6, 32)),
            lambda: fm.CogDecoder(4, 32), dict(ALL_PASS)),
    Foreign("latte-nn-traced", "the same, traced: the trace records the fused ops themselves "
            "(its time embedding uses type_as, which a trace keeps) with the SD-VAE-style decoder, "
            "which traces without a baked dtype", True,
            (4, 4, 8, 8), (6, 32), ("ddim", 10, 5.0), _latte((4, 4, 8, 8), (6, 32)),
            lambda: fm.SDVAEDecoder(4, 32, 4), dict(ALL_PASS)),
    Foreign("latte-nn-qk-overflow", "latte-nn with blocks.1.spatial's q and k projections x200: "
            "attention logits up to ~1e5 overflow FP16 inside the fused layer", False,
            (4, 4, 8, 8), (6, 32), ("ddim", 10, 5.0), _latte((4, 4, 8, 8), (6, 32)),
            lambda: fm.CogDecoder(4, 32), QK_OVERFLOW, "denoiser.blocks.1.spatial.self_attn", _plant_qk),
    Foreign("latte-nn-qk-overflow-traced", "the same, traced as latte-nn-traced is", True,
            (4, 4, 8, 8), (6, 32), ("ddim", 10, 5.0), _latte((4, 4, 8, 8), (6, 32)),
            lambda: fm.SDVAEDecoder(4, 32, 4), QK_OVERFLOW, "denoiser.blocks.1.spatial", _plant_qk),
    Foreign("wan", "Wan-style DiT: Conv3d patches, 3D RoPE as complex float64 (torch.polar, "
            "view_as_complex), RMSNorm and LayerNorm in float32 with type_as, attention by "
            "scaled_dot_product_attention (1.13: its private op), a float64 timestep sinusoid, a "
            "6-way modulation parameter; causal Conv3d decoder", False,
            (4, 4, 8, 8), (6, 32), ("euler", 10, 5.0), _wan((4, 4, 8, 8), (6, 32)),
            lambda: fm.CogDecoder(4, 32), dict(ALL_PASS)),
    Foreign("wan-traced", "the same, traced, DDIM 10 steps: the trace of `x.float()` on a float32 "
            "x is x itself, so the float32 norms' `.type_as(x)` records the float32 value and every "
            "norm hands float32 on (a real bf16 run raises in the first attention's q)", True,
            (4, 4, 8, 8), (6, 32), ("ddim", 10, 5.0), _wan((4, 4, 8, 8), (6, 32)),
            lambda: fm.CogDecoder(4, 32), dict(BAKED_DTYPE), "denoiser.blocks.0.self_attn.q"),
    Foreign("wan-qk-overflow", "wan with blocks.1.self_attn's q and k RMSNorm weights x200: "
            "attention logits past FP16's range inside scaled_dot_product_attention", False,
            (4, 4, 8, 8), (6, 32), ("euler", 10, 5.0), _wan((4, 4, 8, 8), (6, 32)),
            lambda: fm.CogDecoder(4, 32), QK_OVERFLOW, "denoiser.blocks.1.self_attn", _plant_wan_qk),
]
BY_NAME = {p.name: p for p in PACKAGES}


def build(pkg: Foreign, gain: float) -> Tuple[nn.Module, nn.Module]:
    """Default init from one seed per design family (a traced twin has its twin's weights)."""
    torch.manual_seed(1000 + sum(map(ord, pkg.name.split("-")[0])))
    den, dec = pkg.denoiser(gain).eval(), pkg.decoder().eval()
    for p in list(den.parameters()) + list(dec.parameters()):
        p.requires_grad_(False)
    if pkg.plant is not None:
        pkg.plant(den)
    return den, dec


def output_gain(pkg: Foreign) -> float:
    """A power of two that brings the FP32 final latents' std near 1 (a residual STDiT keeps 1)."""
    if pkg.name.startswith("stdit"):
        return 1.0
    den, _ = build(pkg, 1.0)
    design = zoo.Design(pkg.name, pkg.what, pkg.traced, pkg.latent, pkg.cond, pkg.sampler, None, None)
    std = float(zoo.sample(den, design, 0).std())
    return 2.0 ** round(math.log2(1.0 / max(std, 1e-3)))


def example_inputs(pkg: Foreign) -> Tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(7)
    return (torch.randn((1,) + pkg.latent, generator=g), torch.full([1], 999.0),
            torch.randn((1,) + pkg.cond, generator=g))


def write(out_dir: str, pkg: Foreign) -> str:
    den, dec = build(pkg, output_gain(pkg))
    x, t, cond = example_inputs(pkg)
    path = os.path.join(out_dir, pkg.name)
    os.makedirs(path, exist_ok=True)
    if pkg.traced:
        torch.jit.trace(den, (x, t, cond), check_trace=False).save(os.path.join(path, "denoiser.pt"))
        torch.jit.trace(dec, (x,), check_trace=False).save(os.path.join(path, "decoder.pt"))
    else:
        torch.jit.script(den).save(os.path.join(path, "denoiser.pt"))
        torch.jit.script(dec).save(os.path.join(path, "decoder.pt"))
    zoo.write_model_toml(path, f"foreign-{pkg.name}", pkg.latent, pkg.cond, pkg.sampler)
    return path


def table() -> List[dict]:
    return [{"name": p.name, "what": p.what, "traced": p.traced, "clean": p.expected == ALL_PASS,
             "expected": p.expected, "error_module": p.error_module} for p in PACKAGES]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", nargs="?")
    parser.add_argument("--only", default="", help="comma-separated names (default: all): " +
                        ", ".join(BY_NAME))
    parser.add_argument("--list", action="store_true", help="print the package table as JSON")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.list:
        json.dump(table(), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    if not args.out_dir:
        parser.error("OUT_DIR is required (or --list)")
    names = [n for n in args.only.split(",") if n] or list(BY_NAME)
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown package(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    for name in names:
        print(f"wrote {write(args.out_dir, BY_NAME[name])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
