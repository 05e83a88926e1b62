"""Building blocks of the model zoo (pipelines/examples/make_zoo_packages.py): small versions of
the video diffusion denoisers and VAE decoders people ship, written for torch 1.13 (attention
by hand with softmax, no F.scaled_dot_product_attention) so that both torch.jit.script and
torch.jit.trace compile them.

Contract (pipelines/model_package.h):
  denoiser.forward(x [B,C,T,h,w], t [B] float32, cond [B,L,D]) -> eps [B,C,T,h,w]
  decoder.forward(z [B,C,T,h,w]) -> RGB [B,3,T,H,W] in [-1, 1]
The batch is 1 (contract check, guidance 1) or 2 (a CFG batch), so every reshape keeps the
batch dimension as -1 and takes the other sizes from the package's fixed geometry: a traced
package then runs at both batch sizes.

Every denoiser predicts eps = x + f(x, t, cond): its output layer (output_layer()) learns the
residual, which keeps the latents bounded over a few sampler steps; the timestep sinusoid is
built in float32 from t.float() and arange and cast with type_as to the compute dtype, as
real models do.
"""

from __future__ import annotations

import math
from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

GROUPS = 8  # GroupNorm groups everywhere


# --- shared pieces ---------------------------------------------------------------------------

def sinusoid(pos: Tensor, dim: int) -> Tensor:
    """pos [N] (any float dtype) -> [N, dim] float32: cos | sin of pos * 10000^(-i/half)."""
    half = dim // 2
    index = torch.arange(half, dtype=torch.float32).to(pos.float())
    freqs = torch.exp(index * (-math.log(10000.0) / half))
    args = pos.float()[:, None] * freqs[None, :]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


class TimestepEmbed(nn.Module):
    """t [B] float32 -> [B, width] in like's dtype: float32 sinusoid, type_as, MLP."""

    def __init__(self, freq_dim: int, width: int) -> None:
        super().__init__()
        self.freq_dim = freq_dim
        self.mlp = nn.Sequential(nn.Linear(freq_dim, width), nn.SiLU(), nn.Linear(width, width))

    def forward(self, t: Tensor, like: Tensor) -> Tensor:
        return self.mlp(sinusoid(t, self.freq_dim).type_as(like))


def modulate(x: Tensor, shift: Tensor, scale: Tensor) -> Tensor:
    return x * (1.0 + scale) + shift


def frames_to_batch(x: Tensor) -> Tensor:
    """[B, C, T, H, W] -> [B*T, C, H, W]."""
    return x.transpose(1, 2).flatten(0, 1)


def batch_to_frames(y: Tensor, frames: int) -> Tensor:
    """[B*T, C, H, W] -> [B, C, T, H, W]."""
    return y.unflatten(0, (-1, frames)).transpose(1, 2)


class Attention(nn.Module):
    """Multi-head self-attention, [B, N, dim] -> [B, N, dim]; scores = (q k^T) * scale."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale  # [B, H, N, N]
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    def forward(self, x: Tensor) -> Tensor:
        qkv = self.qkv(x).unflatten(-1, (3, self.heads, self.head_dim))  # [B, N, 3, H, hd]
        q = qkv[:, :, 0].transpose(1, 2)                                  # [B, H, N, hd]
        k = qkv[:, :, 1].transpose(1, 2)
        v = qkv[:, :, 2].transpose(1, 2)
        return self.proj(self.attend(q, k, v).transpose(1, 2).flatten(2))


class NaiveSoftmaxAttention(Attention):
    """exp-no-max: softmax written as exp(s) / sum(exp(s)), without subtracting the row max."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        e = torch.exp(scores)
        return torch.matmul(e / e.sum(dim=-1, keepdim=True), v)


class CrossAttention(nn.Module):
    """x [B, N, dim] attends to ctx [B, L, ctx_dim] -> [B, N, dim]."""

    def __init__(self, dim: int, ctx_dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.to_q = nn.Linear(dim, dim)
        self.to_kv = nn.Linear(ctx_dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor, ctx: Tensor) -> Tensor:
        q = self.to_q(x).unflatten(-1, (self.heads, self.head_dim)).transpose(1, 2)
        kv = self.to_kv(ctx).unflatten(-1, (2, self.heads, self.head_dim))
        k = kv[:, :, 0].transpose(1, 2)
        v = kv[:, :, 1].transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.proj(out.transpose(1, 2).flatten(2))


def mlp(dim: int, ratio: int = 4) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim, ratio * dim), nn.GELU(approximate="tanh"),
                         nn.Linear(ratio * dim, dim))


class DiTBlock(nn.Module):
    """adaLN-zero block: x [B, N, D], c [B, D] -> x + gate * attn(mod(LN x)) + gate * mlp(...)."""

    def __init__(self, dim: int, heads: int, attn: nn.Module = None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = attn if attn is not None else Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = mlp(dim)
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        shift1, scale1, gate1, shift2, scale2, gate2 = self.ada(c)[:, None].chunk(6, dim=-1)
        x = x + gate1 * self.attn(modulate(self.norm1(x), shift1, scale1))
        return x + gate2 * self.mlp(modulate(self.norm2(x), shift2, scale2))


class FinalLayer(nn.Module):
    """x [B, N, D], c [B, D] -> [B, N, out]: adaLN (shift, scale), LayerNorm, Linear."""

    def __init__(self, dim: int, out: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))
        self.linear = nn.Linear(dim, out)

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        shift, scale = self.ada(c)[:, None].chunk(2, dim=-1)
        return self.linear(modulate(self.norm(x), shift, scale))


class Patchify(nn.Module):
    """[B, C, T, h, w] <-> tokens [B, T*(h/p)*(w/p), D], patches of p x p per frame."""

    def __init__(self, geo: Tuple[int, int, int, int], dim: int, patch: int,
                 proj: nn.Module = None) -> None:
        super().__init__()
        self.channels, self.frames, self.height, self.width = geo
        self.patch = patch
        self.proj = proj if proj is not None else nn.Conv3d(
            self.channels, dim, kernel_size=(1, patch, patch), stride=(1, patch, patch))

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)

    def unpatchify(self, y: Tensor) -> Tensor:
        """y [B, N, p*p*C] -> [B, C, T, h, w]."""
        p = self.patch
        gh, gw = self.height // p, self.width // p
        y = y.unflatten(1, (self.frames, gh, gw)).unflatten(-1, (p, p, self.channels))
        y = y.permute(0, 6, 1, 2, 4, 3, 5)  # [B, C, T, gh, p, gw, p]
        return y.reshape(-1, self.channels, self.frames, self.height, self.width)


# --- denoisers -------------------------------------------------------------------------------

class DiT(nn.Module):
    """DiT: patchify, learned positions, adaLN-zero blocks on t + pooled text, final layer."""

    def __init__(self, geo, cond_dim: int, dim: int, depth: int, heads: int, patch: int = 2,
                 attn_blocks: List[nn.Module] = None) -> None:
        super().__init__()
        c, t, h, w = geo
        self.patchify = Patchify(geo, dim, patch)
        self.pos_embed = nn.Parameter(torch.zeros(1, t * (h // patch) * (w // patch), dim))
        self.t_embed = TimestepEmbed(64, dim)
        self.y_embed = nn.Linear(cond_dim, dim)
        self.blocks = nn.ModuleList([
            DiTBlock(dim, heads, attn_blocks[i] if attn_blocks is not None else None)
            for i in range(depth)])
        self.final = FinalLayer(dim, patch * patch * c)

    def output_layer(self) -> nn.Module:
        return self.final.linear

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        h = self.patchify(x) + self.pos_embed                 # [B, N, D]
        c = self.t_embed(t, h) + self.y_embed(cond.mean(dim=1))  # [B, D]
        for block in self.blocks:
            h = block(h, c)
        return x + self.patchify.unpatchify(self.final(h, c))


class LattePair(nn.Module):
    """A spatial block (attention within each frame) then a temporal one (across frames)."""

    def __init__(self, dim: int, heads: int, frames: int, tokens: int) -> None:
        super().__init__()
        self.frames, self.tokens = frames, tokens
        self.spatial = DiTBlock(dim, heads)
        self.temporal = DiTBlock(dim, heads)

    def forward(self, h: Tensor, c: Tensor) -> Tensor:
        # h [B, T, S, D]; c [B, D]
        s = self.spatial(h.flatten(0, 1), c.repeat_interleave(self.frames, dim=0))
        h = s.unflatten(0, (-1, self.frames))                                    # [B, T, S, D]
        m = self.temporal(h.transpose(1, 2).flatten(0, 1),
                          c.repeat_interleave(self.tokens, dim=0))               # [B*S, T, D]
        return m.unflatten(0, (-1, self.tokens)).transpose(1, 2)


class Latte(nn.Module):
    """Latte: patch tokens [B, T, S, D], learned spatial positions, a temporal position table
    (float32 sinusoid of the frame index, cast, then temporal_pos: Linear), alternating
    spatial / temporal adaLN blocks."""

    def __init__(self, geo, cond_dim: int, dim: int, pairs: int, heads: int, patch: int = 2,
                 cast_positions: bool = True) -> None:
        super().__init__()
        c, t, h, w = geo
        self.frames, self.tokens = t, (h // patch) * (w // patch)
        self.cast_positions = cast_positions
        self.patchify = Patchify(geo, dim, patch)
        self.spatial_pos = nn.Parameter(torch.zeros(1, 1, self.tokens, dim))
        self.temporal_pos = nn.Linear(16, dim)
        self.t_embed = TimestepEmbed(64, dim)
        self.y_embed = nn.Linear(cond_dim, dim)
        self.blocks = nn.ModuleList([LattePair(dim, heads, t, self.tokens) for _ in range(pairs)])
        self.final = FinalLayer(dim, patch * patch * c)

    def output_layer(self) -> nn.Module:
        return self.final.linear

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        h = self.patchify(x).unflatten(1, (self.frames, self.tokens))  # [B, T, S, D]
        table = sinusoid(torch.arange(self.frames).to(t), 16)           # [T, 16] float32
        if self.cast_positions:
            table = table.type_as(h)
        h = h + self.spatial_pos + self.temporal_pos(table)[None, :, None, :]
        c = self.t_embed(t, h) + self.y_embed(cond.mean(dim=1))
        for pair in self.blocks:
            h = pair(h, c)
        return x + self.patchify.unpatchify(self.final(h.flatten(1, 2), c))


class ResBlock3d(nn.Module):
    """UNet3D resnet: GN, SiLU, Conv3d, + timestep projection, GN, SiLU, Conv3d, skip."""

    def __init__(self, cin: int, cout: int, temb: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(GROUPS, cin)
        self.conv1 = nn.Conv3d(cin, cout, 3, padding=1)
        self.temb_proj = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(GROUPS, cout)
        self.conv2 = nn.Conv3d(cout, cout, 3, padding=1)
        self.skip = nn.Conv3d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: Tensor, temb: Tensor) -> Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb_proj(F.silu(temb))[:, :, None, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class VolumeAttention(nn.Module):
    """GroupNorm, then self-attention over all T*h*w positions, residual."""

    def __init__(self, ch: int, heads: int) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(GROUPS, ch)
        self.attn = Attention(ch, heads)

    def forward(self, x: Tensor) -> Tensor:
        tokens = self.norm(x).flatten(2).transpose(1, 2)         # [B, T*h*w, C]
        return x + self.attn(tokens).transpose(1, 2).reshape_as(x)


class UNet3D(nn.Module):
    """Conv3d UNet: down (stride 1x2x2) and up (nearest x2) with a skip, attention mid."""

    def __init__(self, geo, cond_dim: int, ch: int = 16) -> None:
        super().__init__()
        temb = 2 * ch
        self.t_embed = TimestepEmbed(32, temb)
        self.y_embed = nn.Linear(cond_dim, temb)
        self.conv_in = nn.Conv3d(geo[0], ch, 3, padding=1)
        self.down_res = ResBlock3d(ch, ch, temb)
        self.down = nn.Conv3d(ch, ch, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))
        self.mid_res = ResBlock3d(ch, 2 * ch, temb)
        self.mid_attn = VolumeAttention(2 * ch, 2)
        self.up_conv = nn.Conv3d(2 * ch, 2 * ch, 3, padding=1)
        self.up_res = ResBlock3d(3 * ch, ch, temb)
        self.norm_out = nn.GroupNorm(GROUPS, ch)
        self.conv_out = nn.Conv3d(ch, geo[0], 3, padding=1)

    def output_layer(self) -> nn.Module:
        return self.conv_out

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        h = self.conv_in(x)
        temb = self.t_embed(t, h) + self.y_embed(cond.mean(dim=1))
        skip = self.down_res(h, temb)
        h = self.mid_attn(self.mid_res(self.down(skip), temb))
        h = self.up_conv(F.interpolate(h, scale_factor=(1.0, 2.0, 2.0), mode="nearest"))
        h = self.up_res(torch.cat([h, skip], dim=1), temb)
        return x + self.conv_out(F.silu(self.norm_out(h)))


class Pseudo3dResBlock(nn.Module):
    """Conv2d per frame (GN, SiLU, conv, + temb, GN, SiLU, conv, skip), then a temporal
    residual: GN, SiLU, Conv1d over time at each position."""

    def __init__(self, cin: int, cout: int, temb: int, frames: int) -> None:
        super().__init__()
        self.frames = frames
        self.norm1 = nn.GroupNorm(GROUPS, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb_proj = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(GROUPS, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()
        self.temp_norm = nn.GroupNorm(GROUPS, cout)
        self.temp_conv = nn.Conv1d(cout, cout, 3, padding=1)

    def forward(self, x: Tensor, temb: Tensor) -> Tensor:
        # x [B, C, T, H, W]; temb [B, E]
        xb = frames_to_batch(x)                                           # [B*T, C, H, W]
        h = self.conv1(F.silu(self.norm1(xb)))
        e = self.temb_proj(F.silu(temb)).repeat_interleave(self.frames, dim=0)
        h = self.conv2(F.silu(self.norm2(h + e[:, :, None, None])))
        h = batch_to_frames(self.skip(xb) + h, self.frames)               # [B, C', T, H, W]
        hh, ww = h.shape[3], h.shape[4]
        seq = F.silu(self.temp_norm(h)).permute(0, 3, 4, 1, 2).flatten(0, 2)  # [B*H*W, C', T]
        m = self.temp_conv(seq).unflatten(0, (-1, hh, ww)).permute(0, 3, 4, 1, 2)
        return h + m


class Pseudo3dUNet(nn.Module):
    """Pseudo-3D UNet (ModelScope / AnimateDiff style): Pseudo3dResBlocks, a stride-2 Conv2d
    down, cross-attention to the text tokens per frame in the middle, nearest up, a skip."""

    def __init__(self, geo, cond_dim: int, ch: int = 16) -> None:
        super().__init__()
        c, t, _, _ = geo
        self.frames = t
        temb = 2 * ch
        self.t_embed = TimestepEmbed(32, temb)
        self.y_embed = nn.Linear(cond_dim, temb)
        self.conv_in = nn.Conv2d(c, ch, 3, padding=1)
        self.down_res = Pseudo3dResBlock(ch, ch, temb, t)
        self.down = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
        self.mid_res = Pseudo3dResBlock(ch, 2 * ch, temb, t)
        self.mid_norm = nn.GroupNorm(GROUPS, 2 * ch)
        self.mid_xattn = CrossAttention(2 * ch, cond_dim, 2)
        self.up_conv = nn.Conv2d(2 * ch, 2 * ch, 3, padding=1)
        self.up_res = Pseudo3dResBlock(3 * ch, ch, temb, t)
        self.norm_out = nn.GroupNorm(GROUPS, ch)
        self.conv_out = nn.Conv2d(ch, c, 3, padding=1)

    def output_layer(self) -> nn.Module:
        return self.conv_out

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        h = batch_to_frames(self.conv_in(frames_to_batch(x)), self.frames)
        temb = self.t_embed(t, h) + self.y_embed(cond.mean(dim=1))
        skip = self.down_res(h, temb)
        h = self.mid_res(batch_to_frames(self.down(frames_to_batch(skip)), self.frames), temb)
        hb = frames_to_batch(h)                                          # [B*T, C, h, w]
        tokens = self.mid_norm(hb).flatten(2).transpose(1, 2)            # [B*T, h*w, C]
        ctx = cond.repeat_interleave(self.frames, dim=0)                 # [B*T, L, D]
        hb = hb + self.mid_xattn(tokens, ctx).transpose(1, 2).reshape_as(hb)
        hb = self.up_conv(F.interpolate(hb, scale_factor=2.0, mode="nearest"))
        h = self.up_res(torch.cat([batch_to_frames(hb, self.frames), skip], dim=1), temb)
        out = self.conv_out(F.silu(self.norm_out(frames_to_batch(h))))
        return x + batch_to_frames(out, self.frames)


class MMDiTBlock(nn.Module):
    """MM-DiT block: text and video streams with their own adaLN, qkv, proj and MLP weights,
    one joint attention over [text; video] tokens."""

    def __init__(self, dim: int, heads: int, text_tokens: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.text_tokens = text_tokens
        self.x_ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        self.c_ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        self.x_norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.c_norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.x_qkv = nn.Linear(dim, 3 * dim)
        self.c_qkv = nn.Linear(dim, 3 * dim)
        self.x_proj = nn.Linear(dim, dim)
        self.c_proj = nn.Linear(dim, dim)
        self.x_norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.c_norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.x_mlp = mlp(dim)
        self.c_mlp = mlp(dim)

    def forward(self, x: Tensor, ctx: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
        xs1, xc1, xg1, xs2, xc2, xg2 = self.x_ada(c)[:, None].chunk(6, dim=-1)
        cs1, cc1, cg1, cs2, cc2, cg2 = self.c_ada(c)[:, None].chunk(6, dim=-1)
        qkv = torch.cat([self.c_qkv(modulate(self.c_norm1(ctx), cs1, cc1)),
                         self.x_qkv(modulate(self.x_norm1(x), xs1, xc1))], dim=1)
        qkv = qkv.unflatten(-1, (3, self.heads, self.head_dim))        # [B, L+N, 3, H, hd]
        q = qkv[:, :, 0].transpose(1, 2)
        k = qkv[:, :, 1].transpose(1, 2)
        v = qkv[:, :, 2].transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        out = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).flatten(2)
        ctx = ctx + cg1 * self.c_proj(out[:, :self.text_tokens])
        x = x + xg1 * self.x_proj(out[:, self.text_tokens:])
        ctx = ctx + cg2 * self.c_mlp(modulate(self.c_norm2(ctx), cs2, cc2))
        x = x + xg2 * self.x_mlp(modulate(self.x_norm2(x), xs2, xc2))
        return x, ctx


class MMDiT(nn.Module):
    """MM-DiT (SD3 / CogVideoX style): text tokens through context_embedder, video patches,
    joint-attention blocks, adaLN on t + pooled text, final layer on the video stream."""

    def __init__(self, geo, cond_tokens: int, cond_dim: int, dim: int, depth: int, heads: int,
                 patch: int = 2, patch_proj: nn.Module = None) -> None:
        super().__init__()
        c, t, h, w = geo
        self.patchify = Patchify(geo, dim, patch, patch_proj)
        self.pos_embed = nn.Parameter(torch.zeros(1, t * (h // patch) * (w // patch), dim))
        self.context_embedder = nn.Linear(cond_dim, dim)
        self.t_embed = TimestepEmbed(64, dim)
        self.y_embed = nn.Linear(cond_dim, dim)
        self.blocks = nn.ModuleList([MMDiTBlock(dim, heads, cond_tokens) for _ in range(depth)])
        self.final = FinalLayer(dim, patch * patch * c)

    def output_layer(self) -> nn.Module:
        return self.final.linear

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        h = self.patchify(x) + self.pos_embed
        ctx = self.context_embedder(cond)                                # [B, L, D]
        c = self.t_embed(t, h) + self.y_embed(cond.mean(dim=1))
        for block in self.blocks:
            h, ctx = block(h, ctx, c)
        return x + self.patchify.unpatchify(self.final(h, c))


class ScaledInputPatchProj(nn.Conv3d):
    """fp8-range-weights: the patch projection (Conv3d 1 x p x p, stride p) with its weights
    multiplied by `fold` when an input scale of 1/fold was folded out of the latents' scaling;
    forward(x) = conv3d(x / fold, W, b)."""

    def __init__(self, cin: int, cout: int, patch: int, fold: float) -> None:
        super().__init__(cin, cout, kernel_size=(1, patch, patch), stride=(1, patch, patch))
        self.input_scale = 1.0 / fold

    def forward(self, x: Tensor) -> Tensor:
        return F.conv3d(x * self.input_scale, self.weight, self.bias, self.stride)


class TransformerBlock(nn.Module):
    """Pre-LN block (U-ViT): x + attn(LN x), x + mlp(LN x); optional long-skip input."""

    def __init__(self, dim: int, heads: int, skip: bool = False, attn: nn.Module = None) -> None:
        super().__init__()
        self.skip_linear = nn.Linear(2 * dim, dim) if skip else None
        self.norm1 = nn.LayerNorm(dim)
        self.attn = attn if attn is not None else Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = mlp(dim)

    def forward(self, x: Tensor, skip: Tensor) -> Tensor:
        if self.skip_linear is not None:
            x = self.skip_linear(torch.cat([x, skip], dim=-1))
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class UViT(nn.Module):
    """U-ViT: the time (one token) and the text tokens are tokens too; in-blocks, a mid block,
    out-blocks that take the matching in-block's output through a long skip (concat + Linear)."""

    def __init__(self, geo, cond_tokens: int, cond_dim: int, dim: int, depth: int, heads: int,
                 patch: int = 2, mid_attn: nn.Module = None) -> None:
        super().__init__()
        c, t, h, w = geo
        self.extra = 1 + cond_tokens
        self.patchify = Patchify(geo, dim, patch)
        self.pos_embed = nn.Parameter(
            torch.zeros(1, self.extra + t * (h // patch) * (w // patch), dim))
        self.t_embed = TimestepEmbed(64, dim)
        self.context_embed = nn.Linear(cond_dim, dim)
        self.in_blocks = nn.ModuleList([TransformerBlock(dim, heads) for _ in range(depth)])
        self.mid_block = TransformerBlock(dim, heads, attn=mid_attn)
        self.out_blocks = nn.ModuleList([TransformerBlock(dim, heads, skip=True)
                                         for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, patch * patch * c)

    def output_layer(self) -> nn.Module:
        return self.head

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        patches = self.patchify(x)                                       # [B, N, D]
        time_token = self.t_embed(t, patches)[:, None]                   # [B, 1, D]
        h = torch.cat([time_token, self.context_embed(cond), patches], dim=1) + self.pos_embed
        skips: List[Tensor] = []
        for block in self.in_blocks:
            h = block(h, h)
            skips.append(h)
        h = self.mid_block(h, h)
        for block in self.out_blocks:
            h = block(h, skips.pop())
        out = self.head(self.norm(h)[:, self.extra:])
        return x + self.patchify.unpatchify(out)


class PixArtBlock(nn.Module):
    """PixArt-alpha block: adaLN-single (a shared t projection + this block's scale_shift_table),
    self-attention, cross-attention to the caption tokens, MLP."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.dim = dim
        self.scale_shift_table = nn.Parameter(torch.zeros(6, dim))
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.cross_attn = CrossAttention(dim, dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = mlp(dim)

    def forward(self, x: Tensor, ctx: Tensor, t6: Tensor) -> Tensor:
        mod = self.scale_shift_table[None] + t6.unflatten(-1, (6, self.dim))  # [B, 6, D]
        shift1, scale1, gate1, shift2, scale2, gate2 = mod.chunk(6, dim=1)
        x = x + gate1 * self.attn(modulate(self.norm1(x), shift1, scale1))
        x = x + self.cross_attn(x, ctx)
        return x + gate2 * self.mlp(modulate(self.norm2(x), shift2, scale2))


class PixArt(nn.Module):
    """PixArt-alpha-style DiT with cross-attention to the caption (Open-Sora 1.x's shape)."""

    def __init__(self, geo, cond_dim: int, dim: int, depth: int, heads: int,
                 patch: int = 2) -> None:
        super().__init__()
        c, t, h, w = geo
        self.dim = dim
        self.patchify = Patchify(geo, dim, patch)
        self.pos_embed = nn.Parameter(torch.zeros(1, t * (h // patch) * (w // patch), dim))
        self.t_embed = TimestepEmbed(64, dim)
        self.t_block = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        self.caption_proj = nn.Sequential(nn.Linear(cond_dim, dim), nn.GELU(approximate="tanh"),
                                          nn.Linear(dim, dim))
        self.blocks = nn.ModuleList([PixArtBlock(dim, heads) for _ in range(depth)])
        self.final_table = nn.Parameter(torch.zeros(2, dim))
        self.final_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.final_linear = nn.Linear(dim, patch * patch * c)

    def output_layer(self) -> nn.Module:
        return self.final_linear

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        h = self.patchify(x) + self.pos_embed
        temb = self.t_embed(t, h)                                        # [B, D]
        t6 = self.t_block(temb)                                          # [B, 6D]
        ctx = self.caption_proj(cond)                                    # [B, L, D]
        for block in self.blocks:
            h = block(h, ctx, t6)
        shift, scale = (self.final_table[None] + temb[:, None]).chunk(2, dim=1)
        out = self.final_linear(modulate(self.final_norm(h), shift, scale))
        return x + self.patchify.unpatchify(out)


class RMSNorm(nn.Module):
    """Wan / HunyuanVideo RMSNorm: the mean square in float32, cast back, times a gain."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope_angles(frames: int, h: int, w: int, head_dim: int) -> Tensor:
    """3D rotary angles [frames*h*w, head_dim/2] in float32: the head's pairs split over
    time, height and width, each axis at 10000^(-2i/d) per position."""
    d_t = (head_dim // 3) // 2 * 2
    d_h = (head_dim - d_t) // 4 * 2
    d_w = head_dim - d_t - d_h
    parts = []
    for n, d, axis in ((frames, d_t, 0), (h, d_h, 1), (w, d_w, 2)):
        inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        ang = torch.arange(n, dtype=torch.float32)[:, None] * inv[None, :]
        view = [1, 1, 1, d // 2]
        view[axis] = n
        parts.append(ang.view(view).expand(frames, h, w, d // 2))
    return torch.cat(parts, dim=-1).reshape(frames * h * w, head_dim // 2)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x [B, H, N, hd]: each pair rotated in float32, cast back to x's dtype."""
    xf = x.float().unflatten(-1, (-1, 2))
    a, b = xf[..., 0], xf[..., 1]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2).type_as(x)


class RopeAttention(nn.Module):
    """Wan-style self-attention: separate q/k/v, RMSNorm on q and k, 3D RoPE, softmax in
    float32."""

    def __init__(self, dim: int, heads: int, grid: Tuple[int, int, int]) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = RMSNorm(dim)
        self.norm_k = RMSNorm(dim)
        ang = rope_angles(grid[0], grid[1], grid[2], self.head_dim)
        self.register_buffer("cos", torch.cos(ang), persistent=False)
        self.register_buffer("sin", torch.sin(ang), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        q = self.norm_q(self.q(x)).unflatten(-1, (self.heads, self.head_dim)).transpose(1, 2)
        k = self.norm_k(self.k(x)).unflatten(-1, (self.heads, self.head_dim)).transpose(1, 2)
        v = self.v(x).unflatten(-1, (self.heads, self.head_dim)).transpose(1, 2)
        q = apply_rope(q, self.cos, self.sin)
        k = apply_rope(k, self.cos, self.sin)
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        a = torch.softmax(s.float(), dim=-1).type_as(v)
        return self.o(torch.matmul(a, v).transpose(1, 2).flatten(2))


class WanBlock(nn.Module):
    """Wan 2.x block: a learned modulation table plus the time projection, added and applied
    in float32 (shift, scale, gate for self-attention and the FFN); cross-attention to the
    text with an affine LayerNorm; GELU-tanh FFN (3x)."""

    def __init__(self, dim: int, heads: int, grid: Tuple[int, int, int]) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = RopeAttention(dim, heads, grid)
        self.norm3 = nn.LayerNorm(dim, eps=1e-6)
        self.cross = CrossAttention(dim, dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ffn = nn.Sequential(nn.Linear(dim, 3 * dim), nn.GELU(approximate="tanh"),
                                 nn.Linear(3 * dim, dim))
        self.modulation = nn.Parameter(torch.zeros(1, 6, dim))

    def forward(self, x: Tensor, e: Tensor, ctx: Tensor) -> Tensor:
        m = (self.modulation.float() + e.float()).chunk(6, dim=1)  # e [B, 6, D] float32
        y = self.attn((self.norm1(x).float() * (1 + m[1]) + m[0]).type_as(x))
        x = x + (y.float() * m[2]).type_as(x)
        x = x + self.cross(self.norm3(x), ctx)
        y = self.ffn((self.norm2(x).float() * (1 + m[4]) + m[3]).type_as(x))
        return x + (y.float() * m[5]).type_as(x)


class WanDiT(nn.Module):
    """Wan-style DiT: Conv3d patch embedding (1x2x2), a text MLP, the time MLP kept in float32
    and projected to 6 modulations per block, RoPE blocks, a modulated head."""

    def __init__(self, geo, cond_dim: int, dim: int, depth: int, heads: int) -> None:
        super().__init__()
        c, t, h, w = geo
        self.geo = geo
        self.patch = nn.Conv3d(c, dim, (1, 2, 2), stride=(1, 2, 2))
        self.text = nn.Sequential(nn.Linear(cond_dim, dim), nn.GELU(approximate="tanh"), nn.Linear(dim, dim))
        self.time = nn.Sequential(nn.Linear(32, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.time_proj = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        self.blocks = nn.ModuleList([WanBlock(dim, heads, (t, h // 2, w // 2)) for _ in range(depth)])
        self.head_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.head_modulation = nn.Parameter(torch.zeros(1, 2, dim))
        self.head = nn.Linear(dim, 4 * c)

    def output_layer(self) -> nn.Module:
        return self.head

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        c, frames, height, width = self.geo
        h = self.patch(x).flatten(2).transpose(1, 2)
        e = self.time(sinusoid(t, 32).type_as(h)).float()
        e6 = self.time_proj(e.type_as(h)).float().unflatten(1, (6, -1))
        ctx = self.text(cond)
        for block in self.blocks:
            h = block(h, e6, ctx)
        m = (self.head_modulation.float() + e[:, None]).chunk(2, dim=1)
        y = self.head((self.head_norm(h).float() * (1 + m[1]) + m[0]).type_as(h))
        y = y.unflatten(1, (frames, height // 2, width // 2)).unflatten(-1, (2, 2, c))
        y = y.permute(0, 6, 1, 2, 4, 3, 5).reshape(-1, c, frames, height, width)
        return x + y


# --- decoders --------------------------------------------------------------------------------

class ResBlock2d(nn.Module):
    """VAE resnet on frames [N, C, H, W]: GN, SiLU, conv, GN, SiLU, conv, skip."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(GROUPS, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(GROUPS, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class UpBlock(nn.Module):
    """Nearest x2, Conv2d, ResBlock2d (frames [N, C, H, W])."""

    def __init__(self, ch: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)
        self.res = ResBlock2d(ch, ch)

    def forward(self, x: Tensor) -> Tensor:
        return self.res(self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest")))


class GainUpBlock(UpBlock):
    """vae-upblock-overflow: conv weights x gain and a LayerScale-like gain after the conv, so
    the up-block's activation reaches ~1e5; the next GroupNorm takes the scale out in fp32."""

    def __init__(self, ch: int, gain: float) -> None:
        super().__init__(ch)
        self.gain = nn.Parameter(torch.full([ch, 1, 1], gain))

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest")) * self.gain
        return self.res(h)


class GroupNormDecoder(nn.Module):
    """SD-VAE-style decoder per frame: conv_in, mid resnet, `ups` up-blocks (x2 each),
    GroupNorm, SiLU, conv_out, tanh."""

    def __init__(self, channels: int, frames: int, width: int = 32, ups: int = 1,
                 up_blocks: List[nn.Module] = None) -> None:
        super().__init__()
        self.frames = frames
        self.conv_in = nn.Conv2d(channels, width, 3, padding=1)
        self.mid = ResBlock2d(width, width)
        self.up = nn.ModuleList(up_blocks if up_blocks is not None
                                else [UpBlock(width) for _ in range(ups)])
        self.norm_out = nn.GroupNorm(GROUPS, width)
        self.conv_out = nn.Conv2d(width, 3, 3, padding=1)

    def output_layer(self) -> nn.Module:
        return self.conv_out

    def forward(self, z: Tensor) -> Tensor:
        h = self.mid(self.conv_in(frames_to_batch(z)))
        for block in self.up:
            h = block(h)
        out = torch.tanh(self.conv_out(F.silu(self.norm_out(h))))
        return batch_to_frames(out, self.frames)


class TemporalResBlock(nn.Module):
    """[B, C, T, H, W]: GN, SiLU, Conv3d (3,1,1), GN, SiLU, Conv3d (3,1,1), residual."""

    def __init__(self, ch: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(GROUPS, ch)
        self.conv1 = nn.Conv3d(ch, ch, (3, 1, 1), padding=(1, 0, 0))
        self.norm2 = nn.GroupNorm(GROUPS, ch)
        self.conv2 = nn.Conv3d(ch, ch, (3, 1, 1), padding=(1, 0, 0))

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        return x + self.conv2(F.silu(self.norm2(h)))


class TimeMixBlock(nn.Module):
    """SVD's VAE decoder block: a spatial resnet per frame, a temporal resnet, blended by a
    learned alpha = sigmoid(mix_factor): alpha * spatial + (1 - alpha) * temporal."""

    def __init__(self, ch: int, frames: int) -> None:
        super().__init__()
        self.frames = frames
        self.spatial = ResBlock2d(ch, ch)
        self.temporal = TemporalResBlock(ch)
        self.mix_factor = nn.Parameter(torch.tensor([0.5]))

    def forward(self, x: Tensor) -> Tensor:
        # x [B*T, C, H, W] -> same
        s = batch_to_frames(self.spatial(x), self.frames)
        alpha = torch.sigmoid(self.mix_factor)
        mixed = alpha * s + (1.0 - alpha) * self.temporal(s)
        return frames_to_batch(mixed)


class DriftingTimeMixBlock(TimeMixBlock):
    """drift-before-norm: the blend gets a per-channel bias of +64 (a mean the export left in);
    the GroupNorm after the block removes it in fp32, a 16-bit float loses the blend's detail."""

    def __init__(self, ch: int, frames: int, drift: float) -> None:
        super().__init__(ch, frames)
        self.drift = nn.Parameter(torch.full([ch, 1, 1], drift))

    def forward(self, x: Tensor) -> Tensor:
        s = batch_to_frames(self.spatial(x), self.frames)
        alpha = torch.sigmoid(self.mix_factor)
        mixed = alpha * s + (1.0 - alpha) * self.temporal(s)
        return frames_to_batch(mixed) + self.drift


class TimeMixDecoder(nn.Module):
    """conv_in, mid (time-mix), up-block, out_mix (time-mix), GroupNorm, SiLU, conv_out, tanh."""

    def __init__(self, channels: int, frames: int, width: int = 32,
                 out_mix: nn.Module = None) -> None:
        super().__init__()
        self.frames = frames
        self.conv_in = nn.Conv2d(channels, width, 3, padding=1)
        self.mid = TimeMixBlock(width, frames)
        self.up = UpBlock(width)
        self.out_mix = out_mix if out_mix is not None else TimeMixBlock(width, frames)
        self.norm_out = nn.GroupNorm(GROUPS, width)
        self.conv_out = nn.Conv2d(width, 3, 3, padding=1)

    def output_layer(self) -> nn.Module:
        return self.conv_out

    def forward(self, z: Tensor) -> Tensor:
        h = self.out_mix(self.up(self.mid(self.conv_in(frames_to_batch(z)))))
        out = torch.tanh(self.conv_out(F.silu(self.norm_out(h))))
        return batch_to_frames(out, self.frames)


class CausalConv3d(nn.Module):
    """Conv3d k x 3 x 3 padded k-1 frames in the past only (zeros), 1 pixel spatially."""

    def __init__(self, cin: int, cout: int, time_kernel: int = 3) -> None:
        super().__init__()
        self.time_pad = time_kernel - 1
        self.conv = nn.Conv3d(cin, cout, (time_kernel, 3, 3))

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(F.pad(x, [1, 1, 1, 1, self.time_pad, 0]))


class CausalResBlock(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(GROUPS, ch)
        self.conv1 = CausalConv3d(ch, ch)
        self.norm2 = nn.GroupNorm(GROUPS, ch)
        self.conv2 = CausalConv3d(ch, ch)

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        return x + self.conv2(F.silu(self.norm2(h)))


class CausalDecoder(nn.Module):
    """CogVideoX / Magvit-style causal 3D decoder: every Conv3d sees only past frames."""

    def __init__(self, channels: int, width: int = 32) -> None:
        super().__init__()
        self.conv_in = CausalConv3d(channels, width)
        self.mid = CausalResBlock(width)
        self.up_conv = CausalConv3d(width, width)
        self.up_res = CausalResBlock(width)
        self.norm_out = nn.GroupNorm(GROUPS, width)
        self.conv_out = CausalConv3d(width, 3)

    def output_layer(self) -> nn.Module:
        return self.conv_out.conv

    def forward(self, z: Tensor) -> Tensor:
        h = self.mid(self.conv_in(z))
        h = self.up_conv(F.interpolate(h, scale_factor=(1.0, 2.0, 2.0), mode="nearest"))
        h = self.up_res(h)
        return torch.tanh(self.conv_out(F.silu(self.norm_out(h))))


class MotionBranch(nn.Module):
    """Per-frame motion features: conv3d(z) minus their mean over the clip."""

    def __init__(self, channels: int, width: int) -> None:
        super().__init__()
        self.conv = nn.Conv3d(channels, width, 3, padding=1)

    def forward(self, z: Tensor) -> Tensor:
        f = self.conv(z)                                   # [B, W, T, h, w]
        return f - f.mean(dim=2, keepdim=True)


class KeyframeMotionDecoder(nn.Module):
    """Decodes the clip's mean latent once (the keyframe) and adds each frame's motion
    features (MotionBranch) before the shared trunk: mid resnet, up-block, GN, conv_out."""

    def __init__(self, channels: int, frames: int, width: int = 32) -> None:
        super().__init__()
        self.frames = frames
        self.conv_in = nn.Conv3d(channels, width, (1, 3, 3), padding=(0, 1, 1))
        self.motion = MotionBranch(channels, width)
        self.mid = ResBlock2d(width, width)
        self.up = UpBlock(width)
        self.norm_out = nn.GroupNorm(GROUPS, width)
        self.conv_out = nn.Conv2d(width, 3, 3, padding=1)

    def output_layer(self) -> nn.Module:
        return self.conv_out

    def forward(self, z: Tensor) -> Tensor:
        key = self.conv_in(z.mean(dim=2, keepdim=True))    # [B, W, 1, h, w]
        h = frames_to_batch(key + self.motion(z))          # [B*T, W, h, w]
        h = self.up(self.mid(h))
        out = torch.tanh(self.conv_out(F.silu(self.norm_out(h))))
        return batch_to_frames(out, self.frames)


class ChannelRMSNorm(nn.Module):
    """Wan VAE's RMS_norm over channels: F.normalize(x, dim=1) * sqrt(C) * gamma."""

    def __init__(self, ch: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(ch, 1, 1, 1))
        self.scale = ch ** 0.5

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(x, dim=1) * self.scale * self.gamma


class PaddedCausalConv3d(nn.Module):
    """3x3x3 Conv3d padded with zeros: two past frames, one pixel each side."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(F.pad(x, (1, 1, 1, 1, 2, 0)))


class WanResBlock(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.norm1 = ChannelRMSNorm(ch)
        self.conv1 = PaddedCausalConv3d(ch, ch)
        self.norm2 = ChannelRMSNorm(ch)
        self.conv2 = PaddedCausalConv3d(ch, ch)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv2(F.silu(self.norm2(self.conv1(F.silu(self.norm1(x))))))


class FrameAttention(nn.Module):
    """Per-frame single-head attention over pixels with 1x1 conv projections (VAE mid-block)."""

    def __init__(self, ch: int) -> None:
        super().__init__()
        self.norm = ChannelRMSNorm(ch)
        self.qkv = nn.Conv2d(ch, 3 * ch, 1)
        self.proj = nn.Conv2d(ch, ch, 1)
        self.scale = 1.0 / math.sqrt(ch)

    def forward(self, x: Tensor) -> Tensor:
        frames, height, width = x.shape[2], x.shape[3], x.shape[4]
        q, k, v = self.qkv(frames_to_batch(self.norm(x))).flatten(2).chunk(3, dim=1)  # [BT, C, HW]
        a = torch.softmax(torch.matmul(q.transpose(1, 2), k) * self.scale, dim=-1)
        o = torch.matmul(v, a.transpose(1, 2)).unflatten(2, (height, width))
        return x + batch_to_frames(self.proj(o), frames)


class WanDecoder(nn.Module):
    """Wan-VAE-style causal decoder: conv_in, resnet, frame attention, resnet, 2x up by
    conv + pixel shuffle per frame, resnet, a final norm (channel RMS, or GroupNorm), SiLU,
    conv_out, tanh."""

    def __init__(self, channels: int, frames: int, width: int = 32, group_norm: bool = False) -> None:
        super().__init__()
        self.frames = frames
        self.conv_in = PaddedCausalConv3d(channels, width)
        self.mid1 = WanResBlock(width)
        self.attn = FrameAttention(width)
        self.mid2 = WanResBlock(width)
        self.up_conv = nn.Conv2d(width, 4 * width, 3, padding=1)
        self.up_res = WanResBlock(width)
        self.norm_out = nn.GroupNorm(GROUPS, width) if group_norm else ChannelRMSNorm(width)
        self.conv_out = PaddedCausalConv3d(width, 3)

    def output_layer(self) -> nn.Module:
        return self.conv_out.conv

    def forward(self, z: Tensor) -> Tensor:
        h = self.mid2(self.attn(self.mid1(self.conv_in(z))))
        h = batch_to_frames(F.pixel_shuffle(self.up_conv(frames_to_batch(h)), 2), self.frames)
        return torch.tanh(self.conv_out(F.silu(self.norm_out(self.up_res(h)))))
