#!/usr/bin/env python3
"""Writes the model zoo: small TorchScript packages of the video diffusion architectures people
ship, clean ones and ones with one planted numerical defect, for framegate's tolerance
calibration and its tests.

  make_zoo_packages.py OUT_DIR [--only NAME[,NAME..]] [--scripted | --traced]
  make_zoo_packages.py --list            # the table below as JSON (no OUT_DIR)

Each package goes to OUT_DIR/NAME/ (model.toml, denoiser.pt, decoder.pt, README.md). Each
package has a fixed form (scripted or traced, the table's `traced`); --scripted / --traced
compile every package in that form instead. The modules are in zoo_modules.py.

Weights: every parameter is drawn from a generator seeded with (package design, parameter
name), so a defect package has its clean twin's weights except the planted ones. Scales are
those of a trained model: Linear/Conv weights N(0, 1/fan_in) (adaLN projections 0.3x),
norm affines near (1, 0), then two measured gains, found on the clean twin by running the
sampler in float32 (seed 0): the denoiser's output layer so that the final latents have a
standard deviation of about 1, the decoder's output layer so that its pre-tanh values have a
standard deviation of about 0.8. The gains are rounded to 2^(k/16), so the bytes do not
depend on the last bits of a float32 sum; run with one thread.

The table (PACKAGES) is the one machine-readable source: name, design, clean, traced, the
expected status per policy (with LibTorch 1.13, and with 2.x where its CPU kernels differ:
`expected_libtorch2`), the culprit module as framegate prints it and the culprit's
share of the package's weights (--list).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import zlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    # Same bytes every run: TorchScript writes a module's constants in set order, which
    # follows string hashing. Re-run with a fixed hash seed (before torch is imported).
    os.execve(sys.executable, [sys.executable] + sys.argv,
              dict(os.environ, PYTHONHASHSEED="0"))

import torch  # noqa: E402
from torch import Tensor, nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_modules as zm  # noqa: E402

WEIGHT_SEED = 20250122
CALIBRATION_SEED = 0
POLICIES = ["fp32", "bf16", "fp16-emulated", "fp8e4m3-bf16", "fp8e5m2-bf16"]
ALL_PASS = {p: "PASS" for p in POLICIES}
LATENT_STD, DECODED_STD = 1.0, 0.8


@dataclass
class Design:
    """A clean architecture: geometry, sampler and how to build its two modules."""
    name: str
    what: str
    traced: bool
    latent: Tuple[int, int, int, int]          # channels, frames, height, width
    cond: Tuple[int, int]                      # tokens, dim
    sampler: Tuple[str, int, float]            # kind, steps, guidance
    denoiser: Callable[..., nn.Module]
    decoder: Callable[..., nn.Module]


DESIGNS: Dict[str, Design] = {d.name: d for d in [
    Design("dit-sdpa", "DiT: patchify 2x2, learned positions, 4 adaLN-zero blocks (hand-written "
           "multi-head attention), GroupNorm decoder with one up-block (2x)", False,
           (4, 4, 8, 8), (4, 16), ("ddim", 6, 4.0),
           lambda g, c, **kw: zm.DiT(g, c[1], 32, 4, 4, **kw),
           lambda g, **kw: zm.GroupNormDecoder(g[0], g[1], 32, 1, **kw)),
    Design("latte", "Latte: 2 pairs of spatial / temporal adaLN blocks, a float32 sinusoid "
           "temporal position table cast then projected, time-mix decoder (SVD VAE)", True,
           (4, 8, 8, 8), (4, 16), ("euler", 5, 3.0),
           lambda g, c, **kw: zm.Latte(g, c[1], 32, 2, 4, **kw),
           lambda g, **kw: zm.TimeMixDecoder(g[0], g[1], 32, **kw)),
    Design("unet3d", "UNet3D: Conv3d resnets with GroupNorm and timestep projection, a "
           "stride-2 down, attention over the volume, nearest up with a skip; causal Conv3d "
           "decoder", False, (4, 4, 8, 8), (4, 16), ("ddim", 4, 5.0),
           lambda g, c, **kw: zm.UNet3D(g, c[1], 16, **kw),
           lambda g, **kw: zm.CausalDecoder(g[0], 32, **kw)),
    Design("pseudo3d-unet", "pseudo-3D UNet: Conv2d per frame + Conv1d over time in each "
           "resnet, cross-attention to the text per frame; GroupNorm decoder (2x)", True,
           (4, 8, 16, 16), (6, 24), ("ddim", 6, 3.0),
           lambda g, c, **kw: zm.Pseudo3dUNet(g, c[1], 16, **kw),
           lambda g, **kw: zm.GroupNormDecoder(g[0], g[1], 32, 1, **kw)),
    Design("mmdit", "MM-DiT: text and video streams with separate weights, joint attention, "
           "3 blocks, CFG 5; causal Conv3d decoder", False,
           (4, 4, 8, 8), (8, 32), ("euler", 6, 5.0),
           lambda g, c, **kw: zm.MMDiT(g, c[0], c[1], 32, 3, 4, **kw),
           lambda g, **kw: zm.CausalDecoder(g[0], 32, **kw)),
    Design("uvit", "U-ViT: time and text as tokens, 2 in-blocks, a mid block, 2 out-blocks "
           "with long skips (concat + Linear); time-mix decoder", False,
           (4, 4, 8, 8), (4, 16), ("ddim", 8, 3.0),
           lambda g, c, **kw: zm.UViT(g, c[0], c[1], 32, 2, 4, **kw),
           lambda g, **kw: zm.TimeMixDecoder(g[0], g[1], 32, **kw)),
    Design("deep-dit-vae4x", "deep DiT: 8 adaLN-zero blocks; GroupNorm decoder with two "
           "up-blocks (4x)", True, (4, 4, 8, 8), (4, 16), ("ddim", 4, 4.0),
           lambda g, c, **kw: zm.DiT(g, c[1], 32, 8, 4, **kw),
           lambda g, **kw: zm.GroupNormDecoder(g[0], g[1], 32, 2, **kw)),
    Design("pixart-xattn", "PixArt-alpha-style DiT: adaLN-single with per-block "
           "scale_shift_table, cross-attention to the caption; keyframe + motion decoder", True,
           (4, 4, 8, 8), (8, 32), ("euler", 6, 4.5),
           lambda g, c, **kw: zm.PixArt(g, c[1], 32, 3, 4, **kw),
           lambda g, **kw: zm.KeyframeMotionDecoder(g[0], g[1], 32, **kw)),
]}


@dataclass
class Package:
    name: str
    design: str
    clean: bool
    expected: Dict[str, str]  # with LibTorch 1.13 (Debian 12)
    culprit: Optional[str] = None
    what: str = ""
    denoiser_kw: Callable[[Design], dict] = lambda d: {}
    decoder_kw: Callable[[Design], dict] = lambda d: {}
    # The statuses that differ with LibTorch 2.x, whose CPU kernels compute differently
    # (`what` says how); None: the same as `expected`.
    expected_libtorch2_changes: Optional[Dict[str, str]] = None
    plant: Optional[Callable[[nn.Module, nn.Module], None]] = None

    def expected_libtorch2(self) -> Dict[str, str]:
        return dict(self.expected, **(self.expected_libtorch2_changes or {}))


# --- the planted defects ---------------------------------------------------------------------

UP_GAIN = 300.0         # vae-upblock-overflow: conv weights x300 and a gain of 300
SINK_BLOCK, SINK_CHANNEL, SINK_OUTLIER, SINK_Q, SINK_K = 5, 7, 30.0, 160.0, 160.0
EXP_QK_GAIN = 2.3       # exp-no-max: q/k weights std 2.3/sqrt(fan_in), k = q + 0.3 noise
FP8_FOLD = 3000.0       # fp8-range-weights: patch projection weights x3000, input / 3000
MOTION_DC = 2048.0      # lost-motion: the motion conv's bias carries +2048
DRIFT = 64.0            # drift-before-norm


def _plant_upblock(den: nn.Module, dec: nn.Module) -> None:
    dec.up[0].conv.weight.mul_(UP_GAIN)
    dec.up[0].conv.bias.mul_(UP_GAIN)


def _plant_sink(den: nn.Module, dec: nn.Module) -> None:
    # A massive activation at token 0 (the learned position table), read by head 0 of block 5:
    # q_0 = SINK_Q on every token, k_0 = SINK_K * n[c], so QK^T reaches ~1e5 at the sink
    # token: softmax puts that head on the sink (fine in fp32 and bf16), fp16 overflows.
    dim = den.pos_embed.shape[-1]
    den.pos_embed[0, 0, SINK_CHANNEL] += SINK_OUTLIER
    qkv = den.blocks[SINK_BLOCK].attn.qkv
    qkv.weight[0].zero_()
    qkv.bias[0] = SINK_Q
    qkv.weight[dim].zero_()
    qkv.weight[dim, SINK_CHANNEL] = SINK_K
    qkv.bias[dim] = 0.0


def _plant_exp(den: nn.Module, dec: nn.Module) -> None:
    # Sharp, self-attending heads: k's weights follow q's, logits up to ~20-40 (fine for an
    # exp in fp32 and bf16; exp(x) > 65504 in fp16 from x > 11.09).
    qkv = den.mid_block.attn.qkv
    dim = qkv.weight.shape[1]
    g = torch.Generator().manual_seed(WEIGHT_SEED + 3)
    q = torch.randn(dim, dim, generator=g) * (EXP_QK_GAIN / math.sqrt(dim))
    qkv.weight[:dim] = q
    qkv.weight[dim:2 * dim] = q + 0.3 * torch.randn(dim, dim, generator=g) * (
        EXP_QK_GAIN / math.sqrt(dim))
    qkv.bias[:2 * dim].zero_()


def _plant_fp8_range(den: nn.Module, dec: nn.Module) -> None:
    den.patchify.proj.weight.mul_(FP8_FOLD)


def _plant_motion_dc(den: nn.Module, dec: nn.Module) -> None:
    dec.motion.conv.bias.add_(MOTION_DC)


PACKAGES: List[Package] = [Package(d, d, True, dict(ALL_PASS)) for d in DESIGNS] + [
    Package("vae-upblock-overflow", "dit-sdpa", False,
            dict(ALL_PASS, **{"fp16-emulated": "NONFINITE"}), "decoder.up.0",
            "decoder.up.0's conv weights are x300 and a per-channel gain of 300 follows the "
            "conv (GainUpBlock): the up-block's activation reaches ~1e5 (> 65504); the "
            "GroupNorms after it remove the scale in fp32 and bf16, FP16 overflows to Inf and "
            "the GroupNorm makes NaN. Weights stay below 448 (fp8 unaffected).",
            decoder_kw=lambda d: {"up_blocks": [zm.GainUpBlock(32, UP_GAIN)]},
            plant=_plant_upblock),
    Package("attn-logit-overflow", "deep-dit-vae4x", False,
            dict(ALL_PASS, **{"fp16-emulated": "NONFINITE"}), f"denoiser.blocks.{SINK_BLOCK}.attn",
            f"an attention sink: pos_embed carries +{SINK_OUTLIER:g} in channel {SINK_CHANNEL} "
            f"at token 0, and head 0 of blocks.{SINK_BLOCK}.attn reads it (q bias {SINK_Q:g}, "
            f"k weight {SINK_K:g}): QK^T (the matmul before the scale) exceeds 65504 at the "
            "sink token. fp32 and bf16 put that head on the sink; FP16 gives Inf, then NaN.",
            plant=_plant_sink),
    Package("exp-no-max", "uvit", False, dict(ALL_PASS, **{"fp16-emulated": "NONFINITE"}),
            "denoiser.mid_block.attn",
            "mid_block.attn writes softmax as exp(s) / exp(s).sum() without subtracting the "
            "row max (NaiveSoftmaxAttention), and its heads are sharp (k's weights follow q's): "
            "logits reach 20-40, exp overflows FP16 from 11.09 on; fp32 and bf16 are fine.",
            denoiser_kw=lambda d: {"mid_attn": zm.NaiveSoftmaxAttention(32, 4)},
            plant=_plant_exp),
    Package("fp32-into-linear", "latte", False,
            {"fp32": "PASS", "bf16": "ERROR", "fp16-emulated": "ERROR", "fp8e4m3-bf16": "ERROR",
             "fp8e5m2-bf16": "ERROR"}, "denoiser.temporal_pos",
            "the temporal position table (a float32 sinusoid of arange(T)) goes into "
            "temporal_pos (Linear) without type_as: dtype_mismatch (aten::linear) wherever the "
            "weights are 16-bit; a real FP16 run raises it too (fp16-emulated: ERROR once the "
            "emulation tracks dtypes).",
            denoiser_kw=lambda d: {"cast_positions": False}),
    Package("lost-motion", "pixart-xattn", False,
            {"fp32": "PASS", "bf16": "BROKEN_FRAMES", "fp16-emulated": "FAIL",
             "fp8e4m3-bf16": "FAIL", "fp8e5m2-bf16": "BROKEN_FRAMES"}, "decoder.motion",
            f"the decoder's motion branch (per-frame features minus their clip mean) has a "
            f"+{MOTION_DC:g} bias: the differences between frames (|d| < 1) are below the "
            "spacing of a 16-bit float at 2048 (bf16: 16, fp16: 2), so rounding erases them and "
            "every frame is the keyframe: frozen frames under bf16 and fp8e5m2-bf16. FP16 keeps "
            "the differences above 1 (FAIL, not frozen); E4M3 saturates the bias to 448, where "
            "bf16's spacing is 2 (FAIL).",
            plant=_plant_motion_dc),
    Package("fp8-range-weights", "mmdit", False,
            dict(ALL_PASS, **{"fp8e4m3-bf16": "FAIL"}), "denoiser.patchify.proj",
            f"the patch projection's weights are x{FP8_FOLD:g} (an input scale of "
            f"1/{FP8_FOLD:g} folded out, ScaledInputPatchProj): about half of them are above "
            "E4M3's 448 and saturate; E5M2 (57344) holds them.",
            denoiser_kw=lambda d: {"patch_proj": zm.ScaledInputPatchProj(
                d.latent[0], 32, 2, FP8_FOLD)},
            plant=_plant_fp8_range),
    Package("drift-before-norm", "latte", False,
            {"fp32": "PASS", "bf16": "FAIL", "fp16-emulated": "FAIL", "fp8e4m3-bf16": "FAIL",
             "fp8e5m2-bf16": "FAIL"}, "decoder.out_mix",
            f"decoder.out_mix (a time-mix block) adds +{DRIFT:g} per channel before "
            "norm_out (GroupNorm). LibTorch 1.13's BF16 GroupNorm on the CPU computes its "
            "statistics in BF16, where values around 64 sit on a 1/2 grid: the norm returns "
            "that error at full scale (fp16-emulated: the blend's output on a 1/16 grid); fp32 "
            "removes the offset. Under the FP8 policies the error is about the size of the FP8 "
            "weights' own, so only their compute part (bf16 against the same FP8 weights in "
            "FP32) FAILs. LibTorch 2.x computes BF16 GroupNorm statistics in FP32, as GPUs do: "
            "bf16 and the FP8 policies PASS there.",
            decoder_kw=lambda d: {"out_mix": zm.DriftingTimeMixBlock(32, d.latent[1], DRIFT)},
            expected_libtorch2_changes={"bf16": "PASS", "fp8e4m3-bf16": "PASS",
                                        "fp8e5m2-bf16": "PASS"}),
]
BY_NAME: Dict[str, Package] = {p.name: p for p in PACKAGES}
NAMES: List[str] = [p.name for p in PACKAGES]


# --- weights ---------------------------------------------------------------------------------

def _param_generator(design: str, name: str) -> torch.Generator:
    return torch.Generator().manual_seed(WEIGHT_SEED + zlib.crc32(f"{design}/{name}".encode()))


@torch.no_grad()
def init_trained_like(design: str, root: str, model: nn.Module) -> None:
    """Draws every parameter from its own generator (design, path): weights N(0, 1/fan_in)
    (0.3x for adaLN projections), biases N(0, 0.05), norm affines near (1, 0), tables N(0, 0.3)."""
    for path, mod in model.named_modules():
        full = f"{root}.{path}" if path else root
        if isinstance(mod, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            fan_in = mod.weight[0].numel()
            gain = 0.3 if ("ada" in path or "t_block" in path) else 1.0
            g = _param_generator(design, full + ".weight")
            mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) * gain / math.sqrt(fan_in))
            if mod.bias is not None:
                g = _param_generator(design, full + ".bias")
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 0.05)
        elif isinstance(mod, (nn.GroupNorm, nn.LayerNorm)) and mod.weight is not None:
            g = _param_generator(design, full + ".weight")
            mod.weight.copy_(1.0 + 0.1 * torch.randn(mod.weight.shape, generator=g))
            mod.bias.copy_(0.05 * torch.randn(mod.bias.shape, generator=g))
    for name, p in model.named_parameters(recurse=True):
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("pos_embed", "spatial_pos", "scale_shift_table", "final_table", "modulation",
                    "head_modulation"):
            g = _param_generator(design, f"{root}.{name}")
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)


def _round_gain(k: float) -> float:
    return 2.0 ** (round(16.0 * math.log2(k)) / 16.0)


def _scale_layer(layer: nn.Module, k: float) -> None:
    layer.weight.mul_(k)
    if layer.bias is not None:
        layer.bias.mul_(k)


def alphas_cumprod() -> List[float]:
    lo, hi, prod, out = math.sqrt(0.00085), math.sqrt(0.012), 1.0, []
    for i in range(1000):
        root = lo + (hi - lo) * i / 999
        prod *= 1.0 - root * root
        out.append(prod)
    return out


@torch.no_grad()
def sample(den: nn.Module, design: Design, seed: int) -> Tensor:
    """framegate's sampler (pipelines/sampler.cc: DDIM or Euler, CFG batch [uncond; cond])
    in float32 with torch's own noise: the final latents [1, C, T, h, w]."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((1,) + design.latent, generator=g)
    cond = torch.randn((1,) + design.cond, generator=g)
    kind, steps, guidance = design.sampler
    ab = alphas_cumprod()
    ts = [999] if steps == 1 else [round(999 * (steps - 1 - i) / (steps - 1)) for i in range(steps)]
    sigma = [math.sqrt((1 - ab[t]) / ab[t]) for t in ts] + [0.0]

    def eps_of(xin: Tensor, t: int) -> Tensor:
        e = den(torch.cat([xin, xin]), torch.full([2], float(t)),
                torch.cat([torch.zeros_like(cond), cond]))
        return e[:1] + (e[1:] - e[:1]) * guidance

    if kind == "euler":
        x = x * math.sqrt(sigma[0] ** 2 + 1)
    for i, t in enumerate(ts):
        if kind == "ddim":
            a, a_prev = ab[t], (ab[ts[i + 1]] if i + 1 < len(ts) else 1.0)
            eps = eps_of(x, t)
            x0 = (x - eps * math.sqrt(1 - a)) / math.sqrt(a)
            x = x0 * math.sqrt(a_prev) + eps * math.sqrt(1 - a_prev)
        else:
            eps = eps_of(x / math.sqrt(sigma[i] ** 2 + 1), t)
            x = x + eps * (sigma[i + 1] - sigma[i])
    return x


@torch.no_grad()
def calibrate(den: nn.Module, dec: nn.Module, design: Design) -> Tuple[float, float]:
    """Scales den's and dec's output layers in place (latents std ~1, pre-tanh std ~0.8);
    returns the two gains."""
    k_total = 1.0
    for _ in range(4):
        std = float(sample(den, design, CALIBRATION_SEED).std())
        k = _round_gain(max(0.25, min(4.0, LATENT_STD / std)))
        if k == 1.0:
            break
        _scale_layer(den.output_layer(), k)
        k_total *= k
    z = sample(den, design, CALIBRATION_SEED)
    pre = {}
    layer = dec.output_layer()
    handle = layer.register_forward_hook(lambda m, i, o: pre.__setitem__("out", o))
    dec(z)
    handle.remove()
    k_dec = _round_gain(DECODED_STD / float(pre["out"].std()))
    _scale_layer(layer, k_dec)
    return k_total, k_dec


def build_eager(name: str, calibrated: bool = True) -> Tuple[nn.Module, nn.Module]:
    """The eager (denoiser, decoder) of package `name`, float32, eval mode. The output-layer
    gains come from the clean twin (same design, same weights) so that a defect package differs
    from it only in what is planted."""
    pkg = BY_NAME[name]
    design = DESIGNS[pkg.design]
    gains = _gains(pkg.design) if calibrated else (1.0, 1.0)
    den = design.denoiser(design.latent, design.cond, **pkg.denoiser_kw(design)).eval()
    dec = design.decoder(design.latent, **pkg.decoder_kw(design)).eval()
    init_trained_like(pkg.design, "denoiser", den)
    init_trained_like(pkg.design, "decoder", dec)
    with torch.no_grad():
        _scale_layer(den.output_layer(), gains[0])
        _scale_layer(dec.output_layer(), gains[1])
        if pkg.plant is not None:
            pkg.plant(den, dec)
    for p in list(den.parameters()) + list(dec.parameters()):
        p.requires_grad_(False)
    return den, dec


_GAINS: Dict[str, Tuple[float, float]] = {}


def _gains(design_name: str) -> Tuple[float, float]:
    if design_name not in _GAINS:
        den, dec = build_eager(design_name, calibrated=False)
        _GAINS[design_name] = calibrate(den, dec, DESIGNS[design_name])
    return _GAINS[design_name]


def culprit_share(name: str) -> Optional[float]:
    """The culprit module's share of the package's parameters (both modules), or None."""
    pkg = BY_NAME[name]
    if pkg.culprit is None:
        return None
    den, dec = build_eager(name, calibrated=False)
    total = sum(p.numel() for p in den.parameters()) + sum(p.numel() for p in dec.parameters())
    root, _, path = pkg.culprit.partition(".")
    module = (den if root == "denoiser" else dec).get_submodule(path)
    return sum(p.numel() for p in module.parameters()) / total


def table() -> List[dict]:
    rows = []
    for pkg in PACKAGES:
        den, dec = build_eager(pkg.name, calibrated=False)
        share = culprit_share(pkg.name)
        rows.append({
            "name": pkg.name, "design": pkg.design, "clean": pkg.clean,
            "traced": DESIGNS[pkg.design].traced, "expected": pkg.expected,
            "expected_libtorch2": pkg.expected_libtorch2(),
            "culprit": pkg.culprit, "culprit_share": None if share is None else round(share, 4),
            "parameters": sum(p.numel() for p in den.parameters()) +
            sum(p.numel() for p in dec.parameters()),
        })
    return rows


# --- writing ---------------------------------------------------------------------------------

def example_inputs(design: Design, batch: int = 1) -> Tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(7)
    x = torch.randn((batch,) + design.latent, generator=g)
    cond = torch.randn((batch,) + design.cond, generator=g)
    return x, torch.full([batch], 999.0), cond


def compile_module(module: nn.Module, inputs: Tuple[Tensor, ...], traced: bool):
    if not traced:
        return torch.jit.script(module)
    return torch.jit.trace(module, inputs, check_trace=False)


def readme(pkg: Package, traced: bool, share: Optional[float], params: int) -> str:
    design = DESIGNS[pkg.design]
    kind, steps, guidance = design.sampler
    lines = [f"# {pkg.name}", "", f"Design: {pkg.design} ({design.what}).", "",
             f"Latent {list(design.latent)}, cond {list(design.cond)}, sampler {kind} "
             f"{steps} steps, guidance {guidance:g}; {params} parameters; "
             f"{'torch.jit.trace' if traced else 'torch.jit.script'}.", ""]
    if pkg.clean:
        lines += ["Clean: no planted defect.", ""]
    else:
        lines += [f"Planted defect: {pkg.what}", "",
                  f"Culprit: `{pkg.culprit}` ({100 * share:.2f}% of the package's weights).", ""]
    lines += ["Expected status per policy:", ""]
    lines += [f"- {p}: {s}" for p, s in pkg.expected.items()]
    if pkg.expected_libtorch2_changes:
        lines += ["", "With LibTorch 2.x:", ""]
        lines += [f"- {p}: {s}" for p, s in pkg.expected_libtorch2_changes.items()]
    lines += ["", "Built by pipelines/examples/make_zoo_packages.py (the table there is the "
              "source of these expectations; docs/model_zoo.md has the measured metrics).", ""]
    return "\n".join(lines)


def write_model_toml(path: str, name: str, latent: Tuple[int, int, int, int], cond: Tuple[int, int],
                     sampler: Tuple[str, int, float]) -> None:
    """PATH/model.toml: the package's name, latent geometry, conditioning and sampler."""
    c, f, h, w = latent
    tokens, dim = cond
    kind, steps, guidance = sampler
    with open(os.path.join(path, "model.toml"), "w") as fh:
        fh.write(f'name = "{name}"\n\n'
                 f"[latent]\nchannels = {c}\nframes = {f}\nheight = {h}\nwidth = {w}\n\n"
                 f"[cond]\ntokens = {tokens}\ndim = {dim}\n\n"
                 f'[sampler]\nkind = "{kind}"\nsteps = {steps}\nguidance = {guidance!r}\n')


def write_packages(out_dir: str, names: List[str], form: Optional[str] = None) -> List[str]:
    """Writes OUT_DIR/NAME/{model.toml, denoiser.pt, decoder.pt, README.md} for each name.

    Every package is compiled in the order of NAMES, whichever are written: TorchScript
    numbers the class types it has already seen, so a package's files do not depend on which
    others were asked for."""
    written = []
    for name in NAMES:
        pkg = BY_NAME[name]
        design = DESIGNS[pkg.design]
        traced = design.traced if form is None else form == "traced"
        den, dec = build_eager(name)
        x, t, cond = example_inputs(design)
        den_ts = compile_module(den, (x, t, cond), traced)
        dec_ts = compile_module(dec, (x,), traced)
        if name not in names:
            continue
        path = os.path.join(out_dir, name)
        os.makedirs(path, exist_ok=True)
        den_ts.save(os.path.join(path, "denoiser.pt"))
        dec_ts.save(os.path.join(path, "decoder.pt"))
        write_model_toml(path, f"zoo-{name}", design.latent, design.cond, design.sampler)
        params = sum(p.numel() for p in den.parameters()) + sum(p.numel() for p in dec.parameters())
        with open(os.path.join(path, "README.md"), "w") as fh:
            fh.write(readme(pkg, traced, culprit_share(name), params))
        written.append(path)
    return written


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", nargs="?")
    parser.add_argument("--only", default="",
                        help="comma-separated package names (default: all): " + ", ".join(NAMES))
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--traced", action="store_const", const="traced", dest="form",
                      help="compile every package with torch.jit.trace")
    form.add_argument("--scripted", action="store_const", const="scripted", dest="form",
                      help="compile every package with torch.jit.script")
    parser.add_argument("--list", action="store_true", help="print the package table as JSON")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.list:
        json.dump(table(), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    if not args.out_dir:
        parser.error("OUT_DIR is required (or --list)")
    names = [n for n in args.only.split(",") if n] if args.only else NAMES
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown package(s) {', '.join(unknown)}; known: {', '.join(NAMES)}")
    for path in write_packages(args.out_dir, names, args.form):
        name = os.path.basename(path)
        traced = DESIGNS[BY_NAME[name].design].traced if args.form is None else args.form == "traced"
        print(f"wrote {path} ({'traced' if traced else 'scripted'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
