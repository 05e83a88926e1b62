"""Modules of the foreign packages (make_foreign_packages.py): video denoisers and decoders
written as another author would, with none of the zoo's helpers (zoo_modules.py) and the
idioms of shipped video models that the zoo does not use: a float64 timestep sinusoid (Wan),
softmax(dtype=float32), einsum and baddbmm attention, qk LayerNorm/RMSNorm, 3D RoPE applied in
float32 to the video tokens of a joint text+video attention (CogVideoX), LayerNorm and
GroupNorm upcast to float32, GEGLU, a learned spatial/temporal mix (SVD), ConvTranspose2d,
F.interpolate on 5D tensors, eps predicted directly (no residual), clamp instead of tanh,
torch.nn's nn.TransformerEncoderLayer and nn.MultiheadAttention (fused fast paths in inference).

Same contract as the zoo (pipelines/model_package.h); torch 1.13, scriptable and traceable."""

import math
from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def timestep_embedding_f64(t: Tensor, dim: int) -> Tensor:
    """Wan: the sinusoid in float64."""
    half = dim // 2
    pos = t.to(torch.float64)
    freqs = torch.pow(10000.0, -torch.arange(half, dtype=torch.float64, device=t.device).div(half))
    args = torch.outer(pos, freqs)
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


def timestep_embedding_diffusers(t: Tensor, dim: int) -> Tensor:
    """diffusers get_timestep_embedding, flip_sin_to_cos=True, shift 0."""
    half = dim // 2
    exponent = -math.log(10000.0) * torch.arange(0, half, dtype=torch.float32, device=t.device) / half
    emb = t[:, None].float() * torch.exp(exponent)[None, :]
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    return torch.cat([emb[:, half:], emb[:, :half]], dim=-1)


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x.float(), self.normalized_shape, self.weight.float(), self.bias.float(),
                            self.eps).to(x.dtype)


class FP32GroupNorm(nn.GroupNorm):
    def forward(self, x: Tensor) -> Tensor:
        return F.group_norm(x.float(), self.num_groups, self.weight.float(), self.bias.float(),
                            self.eps).type_as(x)


class RMSNormF(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return (x * torch.rsqrt(var + 1e-6)).to(x.dtype) * self.weight


# --- CogVideoX-style: expert adaLN, full 3D attention over text + video, 3D RoPE -------------

def rope_3d(frames: int, h: int, w: int, hd: int) -> Tuple[Tensor, Tensor]:
    dt = (hd // 4) // 2 * 2
    dh = (hd - dt) // 4 * 2
    dw = hd - dt - dh
    outs = []
    for n, d, axis in ((frames, dt, 0), (h, dh, 1), (w, dw, 2)):
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        f = torch.arange(n).float()[:, None] * inv[None]
        f = torch.repeat_interleave(f, 2, dim=-1)  # [n, d]
        shape = [1, 1, 1, d]
        shape[axis] = n
        outs.append(f.reshape(shape).expand(frames, h, w, d))
    ang = torch.cat(outs, dim=-1).reshape(frames * h * w, hd)
    return ang.cos(), ang.sin()


def rotate_half(x: Tensor) -> Tensor:
    x = x.unflatten(-1, (-1, 2))
    a, b = x.unbind(-1)
    return torch.stack([-b, a], dim=-1).flatten(3)


class CogBlock(nn.Module):
    def __init__(self, dim: int, heads: int, text_len: int, temb: int) -> None:
        super().__init__()
        self.heads, self.hd, self.text_len = heads, dim // heads, text_len
        self.norm1 = nn.LayerNorm(dim, eps=1e-5)
        self.ada1 = nn.Linear(temb, 6 * dim)
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.norm_q = nn.LayerNorm(dim // heads, eps=1e-6)
        self.norm_k = nn.LayerNorm(dim // heads, eps=1e-6)
        self.to_out = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-5)
        self.ada2 = nn.Linear(temb, 6 * dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))

    def forward(self, x: Tensor, ctx: Tensor, temb: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        L = self.text_len
        sh, sc, g, tsh, tsc, tg = self.ada1(F.silu(temb))[:, None].chunk(6, dim=-1)
        nx = self.norm1(x) * (1 + sc) + sh
        nc = self.norm1(ctx) * (1 + tsc) + tsh
        h = torch.cat([nc, nx], dim=1)
        q = self.norm_q(self.to_q(h).unflatten(-1, (self.heads, self.hd)).transpose(1, 2))
        k = self.norm_k(self.to_k(h).unflatten(-1, (self.heads, self.hd)).transpose(1, 2))
        v = self.to_v(h).unflatten(-1, (self.heads, self.hd)).transpose(1, 2)
        qv = q[:, :, L:]
        kv = k[:, :, L:]
        qv = (qv.float() * cos + rotate_half(qv.float()) * sin).to(q.dtype)
        kv = (kv.float() * cos + rotate_half(kv.float()) * sin).to(k.dtype)
        q = torch.cat([q[:, :, :L], qv], dim=2)
        k = torch.cat([k[:, :, :L], kv], dim=2)
        s = q @ k.transpose(-1, -2) * (self.hd ** -0.5)
        a = s.softmax(dim=-1, dtype=torch.float32).to(q.dtype)
        o = self.to_out((a @ v).transpose(1, 2).flatten(2))
        ctx = ctx + tg * o[:, :L]
        x = x + g * o[:, L:]
        sh, sc, g, tsh, tsc, tg = self.ada2(F.silu(temb))[:, None].chunk(6, dim=-1)
        nx = self.norm2(x) * (1 + sc) + sh
        nc = self.norm2(ctx) * (1 + tsc) + tsh
        f = self.ff(torch.cat([nc, nx], dim=1))
        return torch.cat([ctx + tg * f[:, :L], x + g * f[:, L:]], dim=1)


class CogVideoX(nn.Module):
    def __init__(self, geo: Tuple[int, int, int, int], cond: Tuple[int, int], dim: int, depth: int,
                 heads: int, out_gain: float) -> None:
        super().__init__()
        c, t, h, w = geo
        self.c, self.t, self.h, self.w = c, t, h, w
        self.text_len = cond[0]
        self.patch = nn.Conv2d(c, dim, 2, stride=2)
        self.text_proj = nn.Linear(cond[1], dim)
        self.time = nn.Sequential(nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, 2 * dim))
        self.blocks = nn.ModuleList([CogBlock(dim, heads, cond[0], 2 * dim) for _ in range(depth)])
        self.norm_final = nn.LayerNorm(dim)
        self.norm_out = nn.Linear(2 * dim, 2 * dim)
        self.proj_out = nn.Linear(dim, c * 4)
        self.dim, self.out_gain = dim, out_gain
        cos, sin = rope_3d(t, h // 2, w // 2, dim // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        frames = x.transpose(1, 2).flatten(0, 1)                       # [B*T, C, H, W]
        p = self.patch(frames).flatten(2).transpose(1, 2)              # [B*T, hw, D]
        p = p.unflatten(0, (-1, self.t)).flatten(1, 2)                 # [B, T*hw, D]
        temb = self.time(timestep_embedding_diffusers(t, self.dim).to(dtype=p.dtype))
        ctx = self.text_proj(cond)
        for block in self.blocks:
            h = block(p, ctx, temb, self.cos, self.sin)
            ctx, p = h[:, :self.text_len], h[:, self.text_len:]
        shift, scale = self.norm_out(F.silu(temb))[:, None].chunk(2, dim=-1)
        p = self.proj_out(self.norm_final(p) * (1 + scale) + shift)  # [B, T*hw, C*4]
        hh, ww = self.h // 2, self.w // 2
        p = p.reshape(-1, self.t, hh, ww, self.c, 2, 2).permute(0, 4, 1, 2, 5, 3, 6)
        return p.reshape(-1, self.c, self.t, self.h, self.w) * self.out_gain


# --- Latte-style with torch.nn's own layers: nn.TransformerEncoderLayer, nn.MultiheadAttention
# In eval-mode inference without grad these take LibTorch's fused fast path
# (aten::_transformer_encoder_layer_fwd, aten::_native_multi_head_attention).

class LatteNNBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.spatial = nn.TransformerEncoderLayer(dim, heads, 2 * dim, 0.0, activation="gelu",
                                                  batch_first=True, norm_first=True)
        self.temporal = nn.TransformerEncoderLayer(dim, heads, 2 * dim, 0.0, activation="gelu",
                                                   batch_first=True, norm_first=True)
        self.norm = nn.LayerNorm(dim)
        self.cross = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x: Tensor, ctx: Tensor) -> Tensor:  # x [B, T, S, D]
        b, t, s, d = x.shape
        x = self.spatial(x.reshape(b * t, s, d)).reshape(b, t, s, d)
        x = self.temporal(x.transpose(1, 2).reshape(b * s, t, d)).reshape(b, s, t, d).transpose(1, 2)
        a, _ = self.cross(self.norm(x.reshape(b, t * s, d)), ctx, ctx, need_weights=False)
        return x + a.reshape(b, t, s, d)


class LatteNN(nn.Module):
    def __init__(self, geo: Tuple[int, int, int, int], cond: Tuple[int, int], dim: int, depth: int,
                 heads: int, out_gain: float) -> None:
        super().__init__()
        self.c, self.t, self.h, self.w = geo
        self.patch = nn.Linear(self.c, dim)  # 1x1 patches
        self.pos = nn.Parameter(torch.randn(1, 1, self.h * self.w, dim) * 0.02)
        self.time = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.text_proj = nn.Linear(cond[1], dim)
        self.blocks = nn.ModuleList([LatteNNBlock(dim, heads) for _ in range(depth)])
        self.norm_out = nn.LayerNorm(dim)
        self.proj_out = nn.Linear(dim, self.c)
        self.dim, self.out_gain = dim, out_gain

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        b = x.shape[0]
        p = self.patch(x.permute(0, 2, 3, 4, 1).reshape(b, self.t, self.h * self.w, self.c)) + self.pos
        temb = self.time(timestep_embedding_diffusers(t, self.dim).type_as(p))  # traces as type_as
        p = p + temb[:, None, None, :]
        ctx = self.text_proj(cond)
        for block in self.blocks:
            p = block(p, ctx)
        out = self.proj_out(self.norm_out(p))  # [B, T, HW, C]
        out = out.reshape(b, self.t, self.h, self.w, self.c).permute(0, 4, 1, 2, 3)
        return out * self.out_gain


class CausalConv3d(nn.Module):
    def __init__(self, cin: int, cout: int, k: int = 3) -> None:
        super().__init__()
        self.pad = k - 1
        self.conv = nn.Conv3d(cin, cout, k, padding=(0, k // 2, k // 2))

    def forward(self, x: Tensor) -> Tensor:
        first = x[:, :, :1].repeat(1, 1, self.pad, 1, 1)
        return self.conv(torch.cat([first, x], dim=2))


class CogResBlock(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.n1 = FP32GroupNorm(8, ch)
        self.c1 = CausalConv3d(ch, ch)
        self.n2 = FP32GroupNorm(8, ch)
        self.c2 = CausalConv3d(ch, ch)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.c2(F.silu(self.n2(self.c1(F.silu(self.n1(x))))))


class CogDecoder(nn.Module):
    """Causal Conv3d decoder, float32 GroupNorms, 5D nearest upsampling, clamp out."""

    def __init__(self, c: int, ch: int) -> None:
        super().__init__()
        self.conv_in = CausalConv3d(c, ch)
        self.mid = CogResBlock(ch)
        self.up = CausalConv3d(ch, ch)
        self.res = CogResBlock(ch)
        self.norm_out = FP32GroupNorm(8, ch)
        self.conv_out = CausalConv3d(ch, 3)

    def forward(self, z: Tensor) -> Tensor:
        h = self.mid(self.conv_in(z))
        h = F.interpolate(h, scale_factor=(1.0, 2.0, 2.0), mode="nearest")
        h = self.res(self.up(h))
        return self.conv_out(F.silu(self.norm_out(h))).clamp(-1.0, 1.0)


# --- Open-Sora STDiT: spatial then temporal attention, einsum, qk RMSNorm, float64 time ----

class EinsumAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.q_norm = RMSNormF(dim // heads)
        self.k_norm = RMSNormF(dim // heads)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x).unflatten(-1, (3, self.heads, self.hd)).unbind(2)  # [B, N, H, hd]
        q, k = self.q_norm(q), self.k_norm(k)
        s = torch.einsum("bnhd,bmhd->bhnm", q, k) * (self.hd ** -0.5)
        a = torch.softmax(s.float(), dim=-1).to(v.dtype)
        return self.proj(torch.einsum("bhnm,bmhd->bnhd", a, v).flatten(2))


class XAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor, ctx: Tensor) -> Tensor:
        B = x.shape[0]
        q = self.q(x).unflatten(-1, (self.heads, self.hd)).transpose(1, 2).flatten(0, 1)
        k, v = self.kv(ctx).unflatten(-1, (2, self.heads, self.hd)).unbind(2)
        k = k.transpose(1, 2).flatten(0, 1)
        v = v.transpose(1, 2).flatten(0, 1)
        empty = torch.zeros(q.shape[0], q.shape[1], k.shape[1], dtype=q.dtype, device=q.device)
        s = torch.baddbmm(empty, q, k.transpose(1, 2), beta=0.0, alpha=self.hd ** -0.5)
        o = torch.bmm(s.softmax(-1), v)                                     # [B*H, N, hd]
        return self.proj(o.unflatten(0, (B, self.heads)).transpose(1, 2).flatten(2))


class STBlock(nn.Module):
    def __init__(self, dim: int, heads: int, frames: int) -> None:
        super().__init__()
        self.frames = frames
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = EinsumAttention(dim, heads)
        self.norm_t = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.tattn = EinsumAttention(dim, heads)
        self.cross = XAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))
        self.table = nn.Parameter(torch.randn(6, dim) / dim ** 0.5)

    def forward(self, x: Tensor, ctx: Tensor, t6: Tensor) -> Tensor:
        # x [B, T*S, D]
        sh, sc, g, sh2, sc2, g2 = (self.table[None] + t6.reshape(-1, 6, t6.shape[-1] // 6)).chunk(6, 1)
        S = x.shape[1] // self.frames
        h = (self.norm1(x) * (1 + sc) + sh).unflatten(1, (self.frames, S)).flatten(0, 1)
        x = x + g * self.attn(h).unflatten(0, (-1, self.frames)).flatten(1, 2)
        h = self.norm_t(x).unflatten(1, (self.frames, S)).transpose(1, 2).flatten(0, 1)  # [B*S, T, D]
        x = x + self.tattn(h).unflatten(0, (-1, S)).transpose(1, 2).flatten(1, 2)
        x = x + self.cross(x, ctx)
        return x + g2 * self.mlp(self.norm2(x) * (1 + sc2) + sh2)


class STDiT(nn.Module):
    def __init__(self, geo: Tuple[int, int, int, int], cond: Tuple[int, int], dim: int, depth: int,
                 heads: int, out_gain: float) -> None:
        super().__init__()
        c, t, h, w = geo
        self.c, self.t, self.h, self.w, self.dim = c, t, h, w, dim
        self.x_embed = nn.Conv3d(c, dim, (1, 2, 2), stride=(1, 2, 2))
        self.t_embed = nn.Sequential(nn.Linear(64, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.t_block = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        self.y_embed = nn.Sequential(nn.Linear(cond[1], dim), nn.GELU(approximate="tanh"), nn.Linear(dim, dim))
        self.pos = nn.Parameter(torch.randn(1, t * (h // 2) * (w // 2), dim) * 0.02)
        self.blocks = nn.ModuleList([STBlock(dim, heads, t) for _ in range(depth)])
        self.final_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.final_table = nn.Parameter(torch.randn(2, dim) / dim ** 0.5)
        self.final = nn.Linear(dim, 4 * c)
        self.out_gain = out_gain

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        h = self.x_embed(x).flatten(2).transpose(1, 2) + self.pos   # [B, T*S, D]
        temb = self.t_embed(timestep_embedding_f64(t, 64).to(h.dtype))
        t6 = self.t_block(temb)
        ctx = self.y_embed(cond)
        for b in self.blocks:
            h = b(h, ctx, t6)
        sh, sc = (self.final_table[None] + temb[:, None]).chunk(2, 1)
        out = self.final(self.final_norm(h) * (1 + sc) + sh)
        hh, ww = self.h // 2, self.w // 2
        out = out.reshape(-1, self.t, hh, ww, self.c, 2, 2).permute(0, 4, 1, 2, 5, 3, 6)
        return x + self.out_gain * out.reshape(-1, self.c, self.t, self.h, self.w)


class SDVAEDecoder(nn.Module):
    """SD-VAE style per-frame decoder: mid attention (single head, baddbmm), ConvTranspose2d
    up, GroupNorm, tanh."""

    def __init__(self, c: int, ch: int, frames: int) -> None:
        super().__init__()
        self.frames = frames
        self.conv_in = nn.Conv2d(c, ch, 3, padding=1)
        self.norm_a = nn.GroupNorm(8, ch, eps=1e-6)
        self.qkv = nn.Conv2d(ch, 3 * ch, 1)
        self.proj = nn.Conv2d(ch, ch, 1)
        self.up = nn.ConvTranspose2d(ch, ch, 4, stride=2, padding=1)
        self.norm1 = nn.GroupNorm(8, ch, eps=1e-6)
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.norm_out = nn.GroupNorm(8, ch, eps=1e-6)
        self.conv_out = nn.Conv2d(ch, 3, 3, padding=1)
        self.ch = ch

    def forward(self, z: Tensor) -> Tensor:
        x = z.transpose(1, 2).flatten(0, 1)
        h = self.conv_in(x)
        q, k, v = self.qkv(self.norm_a(h)).flatten(2).chunk(3, dim=1)    # [N, C, HW]
        w = torch.bmm(q.transpose(1, 2), k) * (self.ch ** -0.5)
        w = F.softmax(w, dim=2)
        h = h + self.proj(torch.bmm(v, w.transpose(1, 2)).view(h.shape))
        h = self.up(h)
        h = h + self.conv1(F.silu(self.norm1(h)))
        y = torch.tanh(self.conv_out(F.silu(self.norm_out(h))))
        return y.unflatten(0, (-1, self.frames)).transpose(1, 2)


# --- SVD-style UNet: spatial + temporal resnets with a learned mix, GEGLU transformer -------

class AlphaBlender(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mix_factor = nn.Parameter(torch.tensor([0.5]))

    def forward(self, spatial: Tensor, temporal: Tensor) -> Tensor:
        alpha = torch.sigmoid(self.mix_factor).to(spatial.dtype)
        return alpha * spatial + (1.0 - alpha) * temporal


class SpatialRes(nn.Module):
    def __init__(self, cin: int, cout: int, temb: int) -> None:
        super().__init__()
        self.n1 = nn.GroupNorm(8, cin)
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(temb, cout)
        self.n2 = nn.GroupNorm(8, cout)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: Tensor, temb: Tensor) -> Tensor:
        h = self.c1(F.silu(self.n1(x))) + self.t(F.silu(temb))[:, :, None, None]
        return self.skip(x) + self.c2(F.silu(self.n2(h)))


class TemporalRes(nn.Module):
    def __init__(self, ch: int, temb: int) -> None:
        super().__init__()
        self.n1 = nn.GroupNorm(8, ch)
        self.c1 = nn.Conv3d(ch, ch, (3, 1, 1), padding=(1, 0, 0))
        self.t = nn.Linear(temb, ch)
        self.n2 = nn.GroupNorm(8, ch)
        self.c2 = nn.Conv3d(ch, ch, (3, 1, 1), padding=(1, 0, 0))

    def forward(self, x: Tensor, temb: Tensor) -> Tensor:
        h = self.c1(F.silu(self.n1(x))) + self.t(F.silu(temb))[:, :, None, None, None]
        return x + self.c2(F.silu(self.n2(h)))


class VideoRes(nn.Module):
    def __init__(self, cin: int, cout: int, temb: int, frames: int) -> None:
        super().__init__()
        self.frames = frames
        self.spatial = SpatialRes(cin, cout, temb)
        self.temporal = TemporalRes(cout, temb)
        self.blend = AlphaBlender()

    def forward(self, x: Tensor, temb: Tensor) -> Tensor:
        # x [B*T, C, H, W], temb [B, E]
        tf = temb.repeat_interleave(self.frames, dim=0)
        s = self.spatial(x, tf)
        v = s.unflatten(0, (-1, self.frames)).transpose(1, 2)
        v = self.temporal(v, temb)
        v = v.transpose(1, 2).flatten(0, 1)
        return self.blend(s, v)


class GEGLU(nn.Module):
    def __init__(self, dim: int, inner: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, 2 * inner)

    def forward(self, x: Tensor) -> Tensor:
        h, gate = self.proj(x).chunk(2, dim=-1)
        return h * F.gelu(gate)


class SpatialTransformer(nn.Module):
    def __init__(self, ch: int, ctx_dim: int, heads: int, frames: int) -> None:
        super().__init__()
        self.frames, self.heads = frames, heads
        self.norm = nn.GroupNorm(8, ch, eps=1e-6)
        self.proj_in = nn.Linear(ch, ch)
        self.n1 = FP32LayerNorm(ch)
        self.qkv = nn.Linear(ch, 3 * ch, bias=False)
        self.o1 = nn.Linear(ch, ch)
        self.n2 = FP32LayerNorm(ch)
        self.q2 = nn.Linear(ch, ch, bias=False)
        self.kv2 = nn.Linear(ctx_dim, 2 * ch, bias=False)
        self.o2 = nn.Linear(ch, ch)
        self.n3 = FP32LayerNorm(ch)
        self.ff = nn.Sequential(GEGLU(ch, 4 * ch), nn.Linear(4 * ch, ch))
        self.proj_out = nn.Linear(ch, ch)

    def attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        hd = q.shape[-1] // self.heads
        q = q.unflatten(-1, (self.heads, hd)).transpose(1, 2)
        k = k.unflatten(-1, (self.heads, hd)).transpose(1, 2)
        v = v.unflatten(-1, (self.heads, hd)).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1)
        return (a @ v).transpose(1, 2).flatten(2)

    def forward(self, x: Tensor, ctx: Tensor) -> Tensor:
        N, C, H, W = x.shape
        ctx = ctx.repeat_interleave(self.frames, dim=0)
        h = self.proj_in(self.norm(x).flatten(2).transpose(1, 2))
        q, k, v = self.qkv(self.n1(h)).chunk(3, dim=-1)
        h = h + self.o1(self.attend(q, k, v))
        k2, v2 = self.kv2(ctx).chunk(2, dim=-1)
        h = h + self.o2(self.attend(self.q2(self.n2(h)), k2, v2))
        h = h + self.ff(self.n3(h))
        return x + self.proj_out(h).transpose(1, 2).reshape(N, C, H, W)


class SVDUNet(nn.Module):
    def __init__(self, geo: Tuple[int, int, int, int], cond: Tuple[int, int], ch: int, out_gain: float) -> None:
        super().__init__()
        c, t, h, w = geo
        self.c, self.t, self.ch = c, t, ch
        temb = 4 * ch
        self.time = nn.Sequential(nn.Linear(ch, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.conv_in = nn.Conv2d(c, ch, 3, padding=1)
        self.down_res = VideoRes(ch, ch, temb, t)
        self.down = nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1)
        self.mid_res = VideoRes(2 * ch, 2 * ch, temb, t)
        self.mid_attn = SpatialTransformer(2 * ch, cond[1], 4, t)
        self.up_res = VideoRes(3 * ch, ch, temb, t)
        self.norm_out = nn.GroupNorm(8, ch)
        self.conv_out = nn.Conv2d(ch, c, 3, padding=1)
        self.out_gain = out_gain

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        temb = self.time(timestep_embedding_diffusers(t, self.ch).to(x.dtype))
        h0 = self.conv_in(x.transpose(1, 2).flatten(0, 1))
        h1 = self.down_res(h0, temb)
        h = self.mid_res(self.down(h1), temb)
        h = self.mid_attn(h, cond)
        h = F.interpolate(h, scale_factor=2.0, mode="nearest")
        h = self.up_res(torch.cat([h, h1], dim=1), temb)
        out = self.conv_out(F.silu(self.norm_out(h))) * self.out_gain
        return out.unflatten(0, (-1, self.t)).transpose(1, 2)


class TemporalDecoder(nn.Module):
    """SVD temporal VAE decoder: 2D resnets with a Conv3d time mix, an output Conv3d over time."""

    def __init__(self, c: int, ch: int, frames: int) -> None:
        super().__init__()
        self.frames = frames
        self.conv_in = nn.Conv2d(c, ch, 3, padding=1)
        self.n1 = nn.GroupNorm(8, ch, eps=1e-6)
        self.c1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.tn = nn.GroupNorm(8, ch, eps=1e-6)
        self.tc = nn.Conv3d(ch, ch, (3, 1, 1), padding=(1, 0, 0))
        self.blend = AlphaBlender()
        self.n_out = nn.GroupNorm(8, ch, eps=1e-6)
        self.conv_out = nn.Conv2d(ch, 3, 3, padding=1)
        self.time_out = nn.Conv3d(3, 3, (3, 1, 1), padding=(1, 0, 0))

    def forward(self, z: Tensor) -> Tensor:
        x = self.conv_in(z.transpose(1, 2).flatten(0, 1))
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        s = x + self.c1(F.silu(self.n1(x)))
        v = s.unflatten(0, (-1, self.frames)).transpose(1, 2)
        v = v + self.tc(F.silu(self.tn(v)))
        x = self.blend(s, v.transpose(1, 2).flatten(0, 1))
        y = self.conv_out(F.silu(self.n_out(x))).unflatten(0, (-1, self.frames)).transpose(1, 2)
        return torch.tanh(self.time_out(y))


# --- Wan-style: complex RoPE in float64, RMSNorm and LayerNorm in float32, SDPA -------------
# torch 2.x's F.scaled_dot_product_attention where it exists; torch 1.13's private op (the
# same kernel, which also returns the weights) otherwise.
if hasattr(F, "scaled_dot_product_attention"):
    def sdpa(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return F.scaled_dot_product_attention(q, k, v)
else:
    def sdpa(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, False)[0]


def rope_freqs_3d(frames: int, h: int, w: int, hd: int) -> Tensor:
    """Wan's rope_params per axis (torch.polar in float64), split d - 4(d//6), 2(d//6), 2(d//6)
    over frames, rows and columns: complex128 [frames*h*w, hd/2]."""
    def params(n: int, dim: int) -> Tensor:
        f = torch.outer(torch.arange(n, dtype=torch.float64),
                        1.0 / torch.pow(10000.0, torch.arange(0, dim, 2, dtype=torch.float64).div(dim)))
        return torch.polar(torch.ones_like(f), f)
    c = hd // 2
    split = [c - 2 * (c // 3), c // 3, c // 3]
    ft = params(frames, 2 * split[0])[:, None, None, :].expand(frames, h, w, split[0])
    fh = params(h, 2 * split[1])[None, :, None, :].expand(frames, h, w, split[1])
    fw = params(w, 2 * split[2])[None, None, :, :].expand(frames, h, w, split[2])
    return torch.cat([ft, fh, fw], dim=-1).reshape(frames * h * w, c)


def rope_apply(x: Tensor, freqs: Tensor) -> Tensor:  # x [B, L, heads, hd]
    b, l, n, _ = x.shape
    xc = torch.view_as_complex(x.to(torch.float64).reshape(b, l, n, -1, 2))
    return torch.view_as_real(xc * freqs[None, :, None, :]).flatten(3).type_as(x)


class WanRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        y = x.float() * torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return y.type_as(x) * self.weight


class WanLayerNorm(nn.LayerNorm):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__(dim, eps=eps, elementwise_affine=False)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x.float(), self.normalized_shape, None, None, self.eps).type_as(x)


class WanAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.norm_q, self.norm_k = WanRMSNorm(dim), WanRMSNorm(dim)

    def forward(self, x: Tensor, ctx: Tensor, freqs: Tensor, rope: bool) -> Tensor:
        b, s = x.shape[0], x.shape[1]
        q = self.norm_q(self.q(x)).view(b, s, self.heads, self.hd)
        k = self.norm_k(self.k(ctx)).view(b, ctx.shape[1], self.heads, self.hd)
        v = self.v(ctx).view(b, ctx.shape[1], self.heads, self.hd)
        if rope:
            q, k = rope_apply(q, freqs), rope_apply(k, freqs)
        out = sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return self.o(out.transpose(1, 2).flatten(2))


class WanBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = WanLayerNorm(dim), WanLayerNorm(dim)
        self.norm3 = nn.LayerNorm(dim, elementwise_affine=True)
        self.self_attn, self.cross_attn = WanAttention(dim, heads), WanAttention(dim, heads)
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(approximate="tanh"), nn.Linear(2 * dim, dim))
        self.modulation = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, x: Tensor, e: Tensor, ctx: Tensor, freqs: Tensor) -> Tensor:
        e0, e1, e2, e3, e4, e5 = (self.modulation + e).chunk(6, dim=1)
        h = self.norm1(x) * (1 + e1) + e0
        x = x + self.self_attn(h, h, freqs, True) * e2
        x = x + self.cross_attn(self.norm3(x), ctx, freqs, False)
        x = x + self.ffn(self.norm2(x) * (1 + e4) + e3) * e5
        return x


class WanDiT(nn.Module):
    def __init__(self, geo: Tuple[int, int, int, int], cond: Tuple[int, int], dim: int, depth: int,
                 heads: int, out_gain: float) -> None:
        super().__init__()
        c, t, h, w = geo
        self.c, self.t, self.h, self.w = c, t, h, w
        self.patch = nn.Conv3d(c, dim, (1, 2, 2), stride=(1, 2, 2))
        self.text = nn.Sequential(nn.Linear(cond[1], dim), nn.GELU(approximate="tanh"), nn.Linear(dim, dim))
        self.time = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        self.blocks = nn.ModuleList([WanBlock(dim, heads) for _ in range(depth)])
        self.head_norm = WanLayerNorm(dim)
        self.head_modulation = nn.Parameter(torch.randn(1, 2, dim) / dim ** 0.5)
        self.head = nn.Linear(dim, c * 4)
        self.dim, self.out_gain = dim, out_gain
        self.freqs = rope_freqs_3d(t, h // 2, w // 2, dim // heads)  # a plain attribute, as Wan's

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        p = self.patch(x).flatten(2).transpose(1, 2)                 # [B, T*hw, D]
        temb = self.time(timestep_embedding_f64(t, self.dim).type_as(p))
        e = self.time_projection(temb).unflatten(1, (6, self.dim))   # [B, 6, D]
        ctx = self.text(cond)
        for block in self.blocks:
            p = block(p, e, ctx, self.freqs)
        shift, scale = (self.head_modulation + temb[:, None]).chunk(2, dim=1)
        p = self.head(self.head_norm(p) * (1 + scale) + shift)       # [B, T*hw, C*4]
        hh, ww = self.h // 2, self.w // 2
        p = p.reshape(-1, self.t, hh, ww, self.c, 2, 2).permute(0, 4, 1, 2, 5, 3, 6)
        return p.reshape(-1, self.c, self.t, self.h, self.w) * self.out_gain
