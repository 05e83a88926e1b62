#!/usr/bin/env python3
"""Writes small TorchScript model packages that reproduce the field reports, for framegate.

  make_example_packages.py OUT_DIR [--only NAME[,NAME..]] [--traced]

Each package goes to OUT_DIR/NAME/ (model.toml, denoiser.pt, decoder.pt and a README.md that
says what it reproduces, what each policy should do and where the failure starts). The
modules are compiled with torch.jit.script, or with torch.jit.trace under --traced (every
case traces; a traced package keeps one prim::CallMethod per submodule call, but each traced
submodule gets its own class type, so blocks.0 and blocks.1 no longer share one graph).

Packages (module paths as the harness prints them, "denoiser." + the path in the module):

  clean           healthy in fp32, bf16 and fp16-emulated (activations below ~20, the
                  timestep 999 and its sinusoid arguments aside).
  f1-time-embed   F1: the float32 sinusoidal timestep embedding goes into embed.time_mlp
                  without a cast: bf16 fails in denoiser.embed.time_mlp.0 (aten::linear,
                  "mat1 and mat2 must have the same dtype").
  f4-input-fp32   F4: conv_in(x.float()): bf16 fails in denoiser.conv_in (aten::conv3d /
                  aten::_convolution, "expected scalar type Float but found BFloat16").
  f3-ff-overflow  F3: the hidden activation of blocks.1.ff (the output of blocks.1.ff.0) is
                  about -9.0e4: fine in fp32 and bf16, -Inf when rounded to fp16, starting
                  in denoiser.blocks.1.ff.0 (aten::linear); GELU then turns -Inf into NaN.
  nan-in-body     a NaN made by an op in a forward body: torch.log of a negative number in
                  denoiser.blocks.0.attn (aten::log), on every input and under every policy.
  f2-accumulation F2: in denoiser.blocks.0.attn the QK^T bmm (aten::bmm, reduction over 256)
                  has running sums up to 86016 that cancel to small logits: fine with FP32
                  accumulation, Inf (then NaN after softmax) with FP16 accumulation; every
                  activation stays below 6e4, so fp16-emulated activation rounding is fine.

Every package uses the same layout (tiny: 8.5k parameters in both modules, 25k in
f2-accumulation; a forward takes about 1 ms on one CPU thread, 3 ms for f2-accumulation):

  denoiser  embed (time_mlp: Linear, SiLU, Linear; cond_proj: Linear), conv_in (Conv3d),
            blocks (ModuleList of 2 Block: norm (GroupNorm), attn (to_q, to_k, to_v, to_out),
            ff (Linear, GELU, Linear)), conv_out (Conv3d)
  decoder   conv_in (Conv3d), nearest x2 spatial upsampling, conv_out (Conv3d), tanh

Both blocks are instances of one Python class (Block, with one attention class), so the
scripted package has ONE graph for both, entered through prim::CallMethod from the
denoiser's forward. The weights are fixed (torch.manual_seed) and the timesteps stay
float32; apart from the deliberate faults, the modules return the dtype they are given.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Callable, Dict, List, Optional, Tuple

if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    # Same bytes every run: TorchScript writes a module's constants in set order, which
    # follows string hashing. Re-run with a fixed hash seed (before torch is imported).
    os.execve(sys.executable, [sys.executable] + sys.argv,
              dict(os.environ, PYTHONHASHSEED="0"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import Tensor, nn  # noqa: E402

CHANNELS, FRAMES, HEIGHT, WIDTH = 4, 4, 8, 8
TOKENS, DIM = 4, 16
HIDDEN = 16          # channels of the denoiser's trunk (= attention token width)
TEMB = 16            # sinusoidal timestep embedding width
FF_HIDDEN = 32       # hidden width of each block's ff
ATTN_INNER = 16      # q/k width (the QK^T reduction dimension)
F2_ATTN_INNER = 256  # ... in f2-accumulation
GROUPS = 4
WEIGHT_SEED = 20240611
INPUT_SEED = 7       # the example inputs a traced package is traced with
SAMPLER = ("ddim", 6, 3.0)  # kind, steps, guidance

# f3-ff-overflow: blocks.1.norm makes channel F3_CHANNEL a constant F3_NORM_BIAS; hidden
# unit F3_UNIT of blocks.1.ff.0 reads it with weight F3_WEIGHT (both fp16-representable).
F3_CHANNEL, F3_NORM_BIAS, F3_UNIT, F3_WEIGHT = 5, 30.0, 0, -3000.0   # -> about -9.0e4

# f2-accumulation: in blocks.0.attn, q/k dims [0, F2_BIG) are constants (zero weight rows):
# q = F2_Q, k = +F2_K on the first half of them and -F2_K on the second half, so the
# products (768 each) sum to +86016 after 112 dims and back to exactly 0 after 224; dims
# [F2_BIG, 256) carry the real (small) signal.
F2_BIG, F2_Q, F2_K = 224, 24.0, 32.0
ACCUM_BLOCK = 32


# --- modules ---------------------------------------------------------------------------------

class Embed(nn.Module):
    """forward(t [B] float32, cond [B,L,D], like) -> [B, HIDDEN] in like's dtype.

    The sinusoidal embedding is computed in float32 and cast to like's dtype (type_as, so a
    traced package casts at run time too) before time_mlp."""

    def __init__(self) -> None:
        super().__init__()
        self.temb_dim = TEMB
        self.time_mlp = nn.Sequential(nn.Linear(TEMB, HIDDEN), nn.SiLU(),
                                      nn.Linear(HIDDEN, HIDDEN))
        self.cond_proj = nn.Linear(DIM, HIDDEN)  # mean-pooled conditioning

    def sinusoid(self, t: Tensor) -> Tensor:
        half = self.temb_dim // 2
        # .to(t): float32 on t's device, decided at run time (also when traced).
        index = torch.arange(half, dtype=torch.float32).to(t)
        freqs = torch.exp(index * (-math.log(10000.0) / half))
        args = t.float()[:, None] * freqs[None, :]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=1)  # [B, TEMB] float32

    def forward(self, t: Tensor, cond: Tensor, like: Tensor) -> Tensor:
        temb = self.sinusoid(t).type_as(like)
        return self.time_mlp(temb) + self.cond_proj(cond.mean(dim=1))


class EmbedNoCast(Embed):
    """F1: the float32 embedding goes into time_mlp as it is (no cast to like's dtype)."""

    def forward(self, t: Tensor, cond: Tensor, like: Tensor) -> Tensor:
        temb = self.sinusoid(t)  # float32 even when the module was cast to bf16
        return self.time_mlp(temb) + self.cond_proj(cond.mean(dim=1))


class Attention(nn.Module):
    """Single-head self-attention over the latent positions: [B, N, HIDDEN] -> same."""

    def __init__(self, inner: int) -> None:
        super().__init__()
        self.scale = 1.0 / math.sqrt(inner)
        self.to_q = nn.Linear(HIDDEN, inner)
        self.to_k = nn.Linear(HIDDEN, inner)
        self.to_v = nn.Linear(HIDDEN, HIDDEN)
        self.to_out = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: Tensor) -> Tensor:
        q = self.to_q(x)
        k = self.to_k(x)
        v = self.to_v(x)
        scores = torch.bmm(q, k.transpose(1, 2)) * self.scale   # reduction over `inner`
        return self.to_out(torch.bmm(torch.softmax(scores, dim=-1), v))


class TemperedAttention(Attention):
    """nan-in-body: a per-token temperature log(temp_gain * (1 + mean(q^2))).

    temp_gain is +1 in blocks.1 and -1 in blocks.0 (an exported sign bug), so in blocks.0
    aten::log gets a number <= -1 and returns NaN for every finite input."""

    def __init__(self, inner: int, temp_gain: float) -> None:
        super().__init__(inner)
        self.register_buffer("temp_gain", torch.tensor(temp_gain))

    def forward(self, x: Tensor) -> Tensor:
        q = self.to_q(x)
        k = self.to_k(x)
        v = self.to_v(x)
        energy = q.pow(2).mean(dim=-1, keepdim=True)              # [B, N, 1], >= 0
        temp = torch.log(self.temp_gain * (1.0 + energy))         # NaN in blocks.0
        scores = torch.bmm(q, k.transpose(1, 2)) * self.scale / (1.0 + temp)
        return self.to_out(torch.bmm(torch.softmax(scores, dim=-1), v))


class Block(nn.Module):
    """h [B, HIDDEN, T, h, w] -> h + attn(n) + ff(n), n = norm(h) as tokens [B, N, HIDDEN]."""

    def __init__(self, attn: nn.Module) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(GROUPS, HIDDEN)
        self.attn = attn
        self.ff = nn.Sequential(nn.Linear(HIDDEN, FF_HIDDEN), nn.GELU(),
                                nn.Linear(FF_HIDDEN, HIDDEN))

    def forward(self, h: Tensor) -> Tensor:
        n = self.norm(h).flatten(2).transpose(1, 2)
        y = self.attn(n) + self.ff(n)
        return h + y.transpose(1, 2).reshape_as(h)


class Denoiser(nn.Module):
    """forward(x [B,C,T,h,w], t [B] float32, cond [B,L,D]) -> eps [B,C,T,h,w]."""

    def __init__(self, embed: nn.Module, blocks: List[nn.Module]) -> None:
        super().__init__()
        self.embed = embed
        self.conv_in = nn.Conv3d(CHANNELS, HIDDEN, kernel_size=3, padding=1)
        self.blocks = nn.ModuleList(blocks)
        self.conv_out = nn.Conv3d(HIDDEN, CHANNELS, kernel_size=(1, 3, 3), padding=(0, 1, 1))

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        h = self.conv_in(x)
        h = h + self.embed(t, cond, h)[:, :, None, None, None]
        for block in self.blocks:
            h = block(h)
        return x + 0.5 * self.conv_out(F.silu(h))


class DenoiserInputFp32(Denoiser):
    """F4: the input is cast to float32 before conv_in, whatever dtype the module has."""

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        h = self.conv_in(x.float())
        h = h + self.embed(t, cond, h)[:, :, None, None, None]
        for block in self.blocks:
            h = block(h)
        return x + 0.5 * self.conv_out(F.silu(h))


class Decoder(nn.Module):
    """forward(z [B,C,T,h,w]) -> RGB [B,3,T,2h,2w] in [-1, 1]."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_in = nn.Conv3d(CHANNELS, HIDDEN, kernel_size=(1, 3, 3), padding=(0, 1, 1))
        self.conv_out = nn.Conv3d(HIDDEN, 3, kernel_size=(1, 3, 3), padding=(0, 1, 1))

    def forward(self, z: Tensor) -> Tensor:
        h = F.silu(self.conv_in(z))
        h = F.interpolate(h, scale_factor=(1.0, 2.0, 2.0), mode="nearest")
        return torch.tanh(self.conv_out(h))


# --- the packages ----------------------------------------------------------------------------

def _plain(inner: int = ATTN_INNER) -> Denoiser:
    return Denoiser(Embed(), [Block(Attention(inner)), Block(Attention(inner))])


def _build_clean() -> Denoiser:
    return _plain()


def _build_f1() -> Denoiser:
    return Denoiser(EmbedNoCast(), [Block(Attention(ATTN_INNER)), Block(Attention(ATTN_INNER))])


def _build_f4() -> Denoiser:
    return DenoiserInputFp32(Embed(), [Block(Attention(ATTN_INNER)),
                                       Block(Attention(ATTN_INNER))])


def _build_f3() -> Denoiser:
    d = _plain()
    b1 = d.blocks[1]
    with torch.no_grad():
        # blocks.1.norm: channel F3_CHANNEL becomes a constant 30 (a "massive activation"
        # channel); blocks.1.attn ignores it; blocks.1.ff.0 hidden unit F3_UNIT reads it with
        # weight -3000 -> about -9.0e4; GELU maps that to 0 and ff.2 reads the unit with tiny
        # weights, so the fp32 output is normal. Block 0 keeps its default weights.
        b1.norm.weight[F3_CHANNEL] = 0.0
        b1.norm.bias[F3_CHANNEL] = F3_NORM_BIAS
        for lin in (b1.attn.to_q, b1.attn.to_k, b1.attn.to_v):
            lin.weight[:, F3_CHANNEL] = 0.0
        b1.ff[0].weight[:, F3_CHANNEL] = 0.0
        b1.ff[0].weight[F3_UNIT, F3_CHANNEL] = F3_WEIGHT
        b1.ff[2].weight[:, F3_UNIT] = 1e-4
    return d


def _build_nan() -> Denoiser:
    return Denoiser(Embed(), [Block(TemperedAttention(ATTN_INNER, -1.0)),
                              Block(TemperedAttention(ATTN_INNER, 1.0))])


def _build_f2() -> Denoiser:
    d = _plain(F2_ATTN_INNER)
    attn = d.blocks[0].attn
    half = F2_BIG // 2
    with torch.no_grad():
        attn.to_q.weight[:F2_BIG] = 0.0
        attn.to_q.bias[:F2_BIG] = F2_Q
        attn.to_k.weight[:F2_BIG] = 0.0
        attn.to_k.bias[:half] = F2_K
        attn.to_k.bias[half:F2_BIG] = -F2_K
    return d


README = {
    "clean": """\
# clean

A healthy package: the control case. The timestep embedding is computed in float32 and cast
to the activations' dtype before `embed.time_mlp`. Apart from the timestep itself (999)
and the sinusoid's arguments t * freq (float32), every activation (every op output)
stays below ~20 in magnitude, over all sampler steps.

Expected outcome per policy:
- fp32: finishes, finite frames.
- bf16: finishes, finite frames close to fp32.
- fp16-emulated (every activation rounded to fp16): finishes, finite frames.

Failure: none.
""",
    "f1-time-embed": """\
# f1-time-embed

Field report F1: the float32 sinusoidal timestep embedding is fed to `embed.time_mlp`
without a cast to the activations' dtype (`EmbedNoCast.forward`).

Expected outcome per policy:
- fp32: finishes, finite frames.
- bf16: fails on the first denoiser forward (the package-contract check on zeros already
  hits it) with `mat1 and mat2 must have the same dtype`.
- fp16-emulated: finishes (fp32 compute).

Failure starts in: `denoiser.embed.time_mlp.0`, op `aten::linear` (float32 input, bf16
weight).
""",
    "f4-input-fp32": """\
# f4-input-fp32

Field report F4: the denoiser casts its input to float32 before `conv_in`
(`self.conv_in(x.float())` in `DenoiserInputFp32.forward`).

Expected outcome per policy:
- fp32: finishes, finite frames.
- bf16: fails on the first denoiser forward (the package-contract check on zeros already
  hits it) with `expected scalar type Float but found BFloat16`.
- fp16-emulated: finishes (fp32 compute).

Failure starts in: `denoiser.conv_in`, op `aten::conv3d` (`aten::_convolution` in a traced
package; float32 input, bf16 weight).
""",
    "f3-ff-overflow": """\
# f3-ff-overflow

Field report F3: an activation inside `blocks.1.ff` goes past the fp16 range. `blocks.1.norm`
turns channel 5 into a constant 30, and hidden unit 0 of `blocks.1.ff.0` reads it with
weight -3000, so that output is about -9.0e4 (the max |activation| of the whole model). GELU
maps it to 0 (and `blocks.1.ff.2` reads that unit with weights 1e-4), so the fp32 output is
normal. Every other module output stays below 1e2; block 0 has the same class and default
weights. The weights themselves (30, -3000) are fp16-representable: the overflow is in the
activation.

Expected outcome per policy:
- fp32: finishes, finite frames.
- bf16: finishes, finite frames (bf16 has the fp32 exponent range).
- fp16-emulated: NONFINITE: -Inf when the output of `blocks.1.ff.0` is rounded to fp16
  (|x| > 65504), NaN from the GELU (`blocks.1.ff.1`) on, at the first sampler step.
- fp16 (real fp16 compute): the same overflow in the same op.

Failure starts in: `denoiser.blocks.1.ff.0`, op `aten::linear`.
""",
    "nan-in-body": """\
# nan-in-body

A NaN made by an op inside a forward body, not at a submodule boundary: `blocks.0.attn` is
a `TemperedAttention` whose `temp_gain` buffer is -1 (+1 in `blocks.1`), so
`torch.log(self.temp_gain * (1.0 + q.pow(2).mean(-1)))` takes the log of a number <= -1.
The NaN reaches the scores, the softmax and `blocks.0.attn.to_out`; the submodules called
before it (`to_q`, `to_k`, `to_v`) return finite values.

Expected outcome per policy (any policy; the NaN does not depend on the inputs or the seed):
- fp32: NONFINITE at the first sampler step.
- bf16: NONFINITE at the first sampler step.
- fp16-emulated: NONFINITE at the first sampler step.
(The package-contract check on zeros passes: it checks shapes and dtypes only.)

Failure starts in: `denoiser.blocks.0.attn`, op `aten::log` (a module-boundary-only view
sees it first at the output of `denoiser.blocks.0.attn.to_out`).
""",
    "f2-accumulation": """\
# f2-accumulation

Field report F2: attention that is fine with FP32 accumulation but overflows with FP16
accumulation. In `blocks.0.attn` q and k have 256 dims (the QK^T reduction dimension).
Dims 0..223 are constants (zero weight rows, biases): q = 24 on all of them, k = +32 on
dims 0..111 and -32 on dims 112..223, so each product is +-768; the running sum of QK^T
reaches +86016 after 112 dims and cancels back to exactly 0 after 224. Dims 224..255 carry
the real signal, so the QK^T values are small (|QK^T| < ~50, < ~3 after the 1/16 scale).
Every activation (q, k, v, QK^T and all module outputs) stays below 1e2 in magnitude (the
timestep, 999, aside), so rounding activations to fp16 does not overflow; only the
accumulation does.

Emulated FP16 accumulation (products in fp32, running sum rounded to fp16 after each block
of 32 products): 24576, 49152, then 73728 -> Inf after the third block; Inf - ... stays Inf,
so every logit is Inf and the softmax returns NaN.

Expected outcome per policy:
- fp32: finishes, finite frames.
- bf16: finishes (FP32 accumulation; the constants are exact in bf16).
- fp16-emulated (activation rounding only): finishes, finite frames.
- fp16 with FP32 accumulation: finishes.
- FP16 accumulation (e.g. fp16-reduced-accum on a GPU that reduces in fp16): Inf logits,
  NaN after the softmax.

Failure starts in: `denoiser.blocks.0.attn`, op `aten::bmm` (QK^T), NaN from
`aten::softmax` on.
""",
}

BUILDERS: Dict[str, Callable[[], Denoiser]] = {
    "clean": _build_clean,
    "f1-time-embed": _build_f1,
    "f4-input-fp32": _build_f4,
    "f3-ff-overflow": _build_f3,
    "nan-in-body": _build_nan,
    "f2-accumulation": _build_f2,
}
NAMES: List[str] = list(BUILDERS)


def build_eager(name: str) -> Tuple[nn.Module, nn.Module]:
    """The eager (denoiser, decoder) of package `name`, in eval mode, float32."""
    if name not in BUILDERS:
        raise ValueError(f"unknown package {name!r}; known: {', '.join(NAMES)}")
    torch.manual_seed(WEIGHT_SEED)
    denoiser = BUILDERS[name]().eval()
    decoder = Decoder().eval()
    for p in list(denoiser.parameters()) + list(decoder.parameters()):
        p.requires_grad_(False)
    return denoiser, decoder


def example_inputs(batch: int = 1, dtype: torch.dtype = torch.float32,
                   seed: int = INPUT_SEED) -> Tuple[Tensor, Tensor, Tensor]:
    """(x [B,C,T,h,w], t [B] float32 = 999, cond [B,L,D]) drawn from a fixed seed."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, CHANNELS, FRAMES, HEIGHT, WIDTH, generator=g).to(dtype)
    cond = torch.randn(batch, TOKENS, DIM, generator=g).to(dtype)
    t = torch.full([batch], 999.0, dtype=torch.float32)
    return x, t, cond


def compile_module(module: nn.Module, inputs: Tuple[Tensor, ...], traced: bool):
    if not traced:
        return torch.jit.script(module)
    # check_trace re-runs and compares outputs, which NaN outputs never pass.
    return torch.jit.trace(module, inputs, check_trace=False)


def write_packages(out_dir: str, names: List[str], traced: bool = False) -> List[str]:
    """Writes OUT_DIR/NAME/{model.toml, denoiser.pt, decoder.pt, README.md} for each name.

    Every package is compiled, in the order of NAMES, whichever are written: TorchScript
    numbers the class types it has already seen (__torch__.___torch_mangle_N.Block), so a
    package's files do not depend on which others were asked for. (main() also pins
    PYTHONHASHSEED: the order of a module's constants in the saved code follows set order.)"""
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        raise ValueError(f"unknown package(s) {', '.join(unknown)}; known: {', '.join(NAMES)}")
    written = []
    x, t, cond = example_inputs()
    for name in NAMES:
        denoiser, decoder = build_eager(name)
        denoiser_ts = compile_module(denoiser, (x, t, cond), traced)
        decoder_ts = compile_module(decoder, (x,), traced)
        if name not in names:
            continue
        path = os.path.join(out_dir, name)
        os.makedirs(path, exist_ok=True)
        denoiser_ts.save(os.path.join(path, "denoiser.pt"))
        decoder_ts.save(os.path.join(path, "decoder.pt"))
        kind, steps, guidance = SAMPLER
        with open(os.path.join(path, "model.toml"), "w") as f:
            f.write(f'name = "example-{name}"\n\n'
                    f"[latent]\nchannels = {CHANNELS}\nframes = {FRAMES}\n"
                    f"height = {HEIGHT}\nwidth = {WIDTH}\n\n"
                    f"[cond]\ntokens = {TOKENS}\ndim = {DIM}\n\n"
                    f'[sampler]\nkind = "{kind}"\nsteps = {steps}\nguidance = {guidance!r}\n')
        with open(os.path.join(path, "README.md"), "w") as f:
            f.write(README[name])
            f.write("\nBuilt by pipelines/examples/make_example_packages.py " + (
                "(torch.jit.trace: blocks.0 and blocks.1 have separate class types).\n"
                if traced else
                "(torch.jit.script: blocks.0 and blocks.1 share one class type and graph).\n"))
        written.append(path)
    return written


# --- checks shared with tests/python/test_example_packages.py --------------------------------

def fp16_accumulated_bmm(a: Tensor, b: Tensor, block: int = ACCUM_BLOCK) -> Tensor:
    """a @ b ([B,N,K] x [B,K,M]) with FP16 accumulation, emulated: the inputs rounded to fp16,
    the products of each block of `block` reduction indices summed in fp32, and the running
    sum rounded to fp16 after each block. Returns float16."""
    a16, b16 = a.half().float(), b.half().float()
    acc = torch.zeros(a.shape[0], a.shape[1], b.shape[2], dtype=torch.float16)
    for k0 in range(0, a.shape[-1], block):
        part = torch.bmm(a16[:, :, k0:k0 + block], b16[:, k0:k0 + block, :])
        acc = (acc.float() + part).half()
    return acc


def max_running_sum(a: Tensor, b: Tensor, block: int = ACCUM_BLOCK) -> float:
    """The largest |running sum| of a @ b in fp32 at the block boundaries."""
    acc = torch.zeros(a.shape[0], a.shape[1], b.shape[2], dtype=torch.float32)
    peak = 0.0
    for k0 in range(0, a.shape[-1], block):
        acc = acc + torch.bmm(a[:, :, k0:k0 + block], b[:, k0:k0 + block, :])
        peak = max(peak, float(acc.abs().max()))
    return peak


def module_output_maxima(module: nn.Module, inputs: Tuple[Tensor, ...],
                         round_fp16: bool = False) -> Tuple[Dict[str, float], Tensor]:
    """Runs the eager `module` with a forward hook on every submodule; returns
    ({path: max |output|}, output). With round_fp16 every submodule output is rounded
    through float16 (the fp16-emulated policy at module granularity)."""
    maxima: Dict[str, float] = {}
    handles = []

    def hook(path: str):
        def fn(_mod, _inp, out):
            if round_fp16 and out.is_floating_point():
                out = out.half().float()
            maxima[path] = float(out.detach().abs().max())
            return out if round_fp16 else None
        return fn

    for path, sub in module.named_modules():
        if path:
            handles.append(sub.register_forward_hook(hook(path)))
    try:
        with torch.no_grad():
            out = module(*inputs)
    finally:
        for h in handles:
            h.remove()
    return maxima, out


class RoundOpsToFp16(torch.overrides.TorchFunctionMode):
    """Rounds the floating-point output of every torch op through float16 (the fp16-emulated
    policy at op granularity) and records the largest |output|."""

    def __init__(self) -> None:
        super().__init__()
        self.peak = 0.0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, Tensor) and out.is_floating_point() and out.numel():
            self.peak = max(self.peak, float(out.detach().abs().max()))
            out = out.half().to(out.dtype)
        return out


class _FirstNonFinite(torch.overrides.TorchFunctionMode):
    def __init__(self, stack: List[str], round_fp16: bool) -> None:
        super().__init__()
        self.stack = stack
        self.round_fp16 = round_fp16
        self.first: Optional[Tuple[str, str]] = None
        self.peaks: Dict[str, float] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, Tensor) and out.is_floating_point() and out.numel():
            if self.round_fp16:
                out = out.half().to(out.dtype)
            path = self.stack[-1]
            finite = bool(torch.isfinite(out).all())
            peak = float(out.detach().abs().max()) if finite else math.inf
            self.peaks[path] = max(self.peaks.get(path, 0.0), peak)
            if not finite and self.first is None:
                self.first = (path, getattr(func, "__name__", str(func)))
        return out


def localise_nonfinite(module: nn.Module, inputs: Tuple[Tensor, ...], root: str = "denoiser",
                       round_fp16: bool = False
                       ) -> Tuple[Optional[Tuple[str, str]], Dict[str, float], Tensor]:
    """Runs the eager `module` and sees every torch op (a TorchFunctionMode) with the module
    it runs in (a stack kept by forward hooks), like the harness's graph instrumentation.
    With round_fp16 every op output is rounded through float16 (fp16-emulated at op
    granularity). Returns (first, peaks, output): first = (module path, op name) of the
    first op with a non-finite output, or None; peaks = {module path: max |op output|}
    over the ops that ran directly in that module (inf once one was non-finite)."""
    stack = [root]

    def enter(full: str):
        def fn(_mod, _inp) -> None:
            stack.append(full)
        return fn

    def leave(_mod, _inp, _out) -> None:
        stack.pop()

    handles = []
    for path, sub in module.named_modules():
        if path:
            handles.append(sub.register_forward_pre_hook(enter(f"{root}.{path}")))
            handles.append(sub.register_forward_hook(leave))
    mode = _FirstNonFinite(stack, round_fp16)
    try:
        with torch.no_grad(), mode:
            out = module(*inputs)
    finally:
        for h in handles:
            h.remove()
    return mode.first, mode.peaks, out


def attn_qk(denoiser: nn.Module, inputs: Tuple[Tensor, ...], block: int = 0
            ) -> Tuple[Tensor, Tensor, float]:
    """(q, k, scale) of blocks.<block>.attn on one forward of the eager denoiser."""
    attn = denoiser.blocks[block].attn
    seen: Dict[str, Tensor] = {}
    hs = [attn.to_q.register_forward_hook(lambda m, i, o: seen.__setitem__("q", o)),
          attn.to_k.register_forward_hook(lambda m, i, o: seen.__setitem__("k", o))]
    try:
        with torch.no_grad():
            denoiser(*inputs)
    finally:
        for h in hs:
            h.remove()
    return seen["q"], seen["k"], attn.scale


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--only", default="",
                        help="comma-separated package names (default: all): " + ", ".join(NAMES))
    parser.add_argument("--traced", action="store_true",
                        help="compile with torch.jit.trace instead of torch.jit.script")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] if args.only else NAMES
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        parser.error(f"unknown package(s) {', '.join(unknown)}; known: {', '.join(NAMES)}")
    for path in write_packages(args.out_dir, names, traced=args.traced):
        print(f"wrote {path} ({'traced' if args.traced else 'scripted'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
