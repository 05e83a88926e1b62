"""`framegate check`, `golden` and `metrics` driven as real subprocesses on real files."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")
sys.path.insert(0, str(SOURCE / "pipelines" / "crosscheck"))
import make_crosscheck_package  # noqa: E402

FAST = ("--steps", "3", "--threads", "1")


def run(*args, check=False):
    return subprocess.run([FRAMEGATE, *args], capture_output=True, text=True, check=check)


def one_line_error(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("framegate: error: ") and r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


@pytest.fixture(scope="module")
def goldens(tmp_path_factory):
    d = tmp_path_factory.mktemp("golden")
    r = run("golden", "make", "--size", "tiny", "--seed", "0", *FAST, "--golden-dir", str(d))
    assert r.returncode == 0, r.stderr
    return d


def test_golden_list_and_check(goldens):
    listed = json.loads(run("golden", "list", "--json", "-", "--golden-dir", str(goldens)).stdout)
    assert len(listed) == 1 and listed[0]["config"].startswith("golden-v1|pipeline=reference:tiny")
    r = run("golden", "check", "--golden-dir", str(goldens))
    assert r.returncode == 0 and "all intact" in r.stdout


def test_check_passes_clean_policies_and_writes_the_cells_json(goldens, tmp_path):
    out = tmp_path / "cells.json"
    r = run("check", "--size", "tiny", "--policy", "fp32,bf16", *FAST, "--golden-dir", str(goldens),
            "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    cells = json.loads(out.read_text())["cells"]
    assert [c["status"] for c in cells] == ["PASS", "PASS"]
    for key in ("cell_id", "pipeline", "device", "policy", "seed", "status", "reason", "metrics",
                "health", "first_nonfinite"):
        assert key in cells[1]
    assert cells[0]["metrics"]["frames"][0]["psnr"] is None  # identical to the golden: inf
    assert 30 < cells[1]["metrics"]["min_psnr"] < 200
    assert len(cells[0]["cell_id"]) == 16 and cells[0]["cell_id"] != cells[1]["cell_id"]


def test_check_names_fault_statuses_and_reproduces(goldens, tmp_path):
    out = tmp_path / "cells.json"
    r = run("check", "--size", "tiny", "--policy", "fp16-emulated", "--fault", "attn-overflow", *FAST,
            "--golden-dir", str(goldens), "--json", str(out))
    assert r.returncode == 1
    cell = json.loads(out.read_text())["cells"][0]
    assert cell["status"] == "NONFINITE"
    first = cell["first_nonfinite"]
    assert first["found"] and "spatial_attn" in first["module"]
    assert cell["reason"].endswith(f"at step {first['step']} in {first['module']}")
    assert "reproduce: framegate check --size tiny --device cpu --policy fp16-emulated" in r.stdout
    r = run("check", "--size", "tiny", "--policy", "bf16", "--fault", "time-embed-fp32", *FAST,
            "--golden-dir", str(goldens), "--json", str(out))
    cell = json.loads(out.read_text())["cells"][0]
    assert r.returncode == 1 and cell["status"] == "ERROR"
    assert cell["reason"].startswith("dtype_mismatch: mat1 and mat2 must have the same dtype")


def test_missing_golden_is_unresolved_with_the_make_command(tmp_path):
    r = run("check", "--size", "tiny", "--seed", "5", *FAST, "--golden-dir", str(tmp_path))
    assert r.returncode == 1
    assert "UNRESOLVED" in r.stdout and "framegate golden make --size tiny --seed 5" in r.stdout


def test_damaged_golden_is_an_error_naming_the_file(goldens, tmp_path):
    damaged = tmp_path / "golden"
    damaged.mkdir()
    for f in goldens.iterdir():
        (damaged / f.name).write_bytes(f.read_bytes())
    golden = next(damaged.glob("*.safetensors"))
    data = bytearray(golden.read_bytes())
    data[-5] ^= 0xFF
    golden.write_bytes(bytes(data))
    one_line_error(run("check", "--size", "tiny", *FAST, "--golden-dir", str(damaged)),
                   golden.name, "sha256")
    r = run("golden", "check", "--golden-dir", str(damaged))
    assert r.returncode == 2 and golden.name in r.stderr
    golden.write_bytes(bytes(data[: len(data) // 2]))
    one_line_error(run("check", "--size", "tiny", *FAST, "--golden-dir", str(damaged)), golden.name)


def test_check_bad_input_is_exit_2():
    one_line_error(run("check", "--policy", "fp12", *FAST), "unknown policy 'fp12'")
    one_line_error(run("check", "--fault", "gremlins", *FAST), "gremlins")
    one_line_error(run("check", "--tolerance", "lax", *FAST), "unknown tolerance profile 'lax'")


def test_model_package_goldens_are_made_and_checked_the_same_way(tmp_path):
    package = tmp_path / "pkg"
    make_crosscheck_package.write_package(str(package), sampler="ddim", steps=4, guidance=2.0)
    goldens = tmp_path / "golden"
    r = run("golden", "make", "--model", str(package), "--golden-dir", str(goldens), "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "model-pkg-seed0-" in r.stdout
    r = run("check", "--model", str(package), "--policy", "fp32,bf16", "--golden-dir", str(goldens),
            "--threads", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [l.split()[0] for l in r.stdout.splitlines()[:2]] == ["PASS", "PASS"]
    # A changed model no longer matches its golden: UNRESOLVED, never a pass.
    (package / "decoder.pt").write_bytes((package / "decoder.pt").read_bytes() + b"\0")
    r = run("check", "--model", str(package), "--golden-dir", str(goldens), "--threads", "1")
    assert r.returncode == 1 and r.stdout.startswith("UNRESOLVED"), r.stdout


def video(frames=6, h=24, w=24, shift=0.15):
    x = np.linspace(0, 1, w, dtype=np.float32)[None, None, :, None]
    t = np.arange(frames, dtype=np.float32)[:, None, None, None] * shift
    return np.broadcast_to(0.5 + 0.4 * np.sin((x + t) * 6.28), (frames, h, w, 3)).astype(np.float32)


def test_metrics_json_npy_png_and_shapes(tmp_path):
    ref = video()
    np.save(tmp_path / "ref.npy", ref)
    np.save(tmp_path / "same.npy", ref)
    noisy = np.clip(ref + np.random.default_rng(0).normal(0, 0.01, ref.shape), 0, 1).astype(np.float32)
    np.save(tmp_path / "noisy.npy", noisy)
    same = json.loads(run("metrics", str(tmp_path / "ref.npy"), str(tmp_path / "same.npy"), "--json", "-").stdout)
    assert all(f["psnr"] is None and f["ssim"] == 1.0 for f in same["frames"])
    m = json.loads(run("metrics", str(tmp_path / "ref.npy"), str(tmp_path / "noisy.npy"), "--json", "-").stdout)
    mse = ((noisy.astype(np.float64) - ref) ** 2).mean(axis=(1, 2, 3))
    assert np.allclose([f["psnr"] for f in m["frames"]], 10 * np.log10(1 / mse), atol=1e-3)
    assert m["health"]["defect"] == "none" and len(m["frames"]) == 6
    for key in ("max_abs", "rel_l2", "temporal_rel_l2", "cosine", "min_psnr", "mean_ssim"):
        assert key in m
    # --json FILE writes the same JSON to the file and keeps the text on stdout.
    to_file = run("metrics", str(tmp_path / "ref.npy"), str(tmp_path / "noisy.npy"), "--json",
                  str(tmp_path / "m.json"))
    assert json.loads((tmp_path / "m.json").read_text()) == m
    assert "min_psnr" in to_file.stdout and not to_file.stdout.lstrip().startswith("{")
    # uint8 npy and a PNG folder read as the same video.
    u8 = np.round(ref * 255).astype(np.uint8)
    np.save(tmp_path / "u8.npy", u8)
    frames_dir = tmp_path / "png"
    frames_dir.mkdir()
    import matplotlib.image
    for i, f in enumerate(u8):
        matplotlib.image.imsave(frames_dir / f"frame_{i:04d}.png", f)
    a = json.loads(run("metrics", str(tmp_path / "u8.npy"), str(frames_dir), "--json", "-").stdout)
    assert all(f["psnr"] is None for f in a["frames"]), a["frames"]
    np.save(tmp_path / "short.npy", ref[:4])
    one_line_error(run("metrics", str(tmp_path / "ref.npy"), str(tmp_path / "short.npy")), "short.npy")
    (tmp_path / "empty").mkdir()
    one_line_error(run("metrics", str(tmp_path / "ref.npy"), str(tmp_path / "empty")), "no .png frames")


def test_metrics_tells_nan_black_and_frozen_apart(tmp_path):
    ref = video()
    np.save(tmp_path / "ref.npy", ref)
    cases = {
        "nonfinite": np.full_like(ref, np.nan),
        "black": np.zeros_like(ref),
        "frozen": np.broadcast_to(ref[:1], ref.shape).copy(),
    }
    for kind, cand in cases.items():
        np.save(tmp_path / f"{kind}.npy", cand)
        r = run("metrics", str(tmp_path / "ref.npy"), str(tmp_path / f"{kind}.npy"), "--json", "-")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["health"]["defect"] == kind


def test_clean_policies_pass_against_the_committed_goldens():
    committed = SOURCE / "golden"
    r = run("golden", "check", "--golden-dir", str(committed))
    assert r.returncode == 0 and "6 goldens" in r.stdout, r.stdout + r.stderr
    r = run("check", "--size", "tiny", "--policy", "fp32,bf16,fp16-emulated,fp8e4m3-bf16,fp8e5m2-bf16",
            "--golden-dir", str(committed), "--threads", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [l.split()[0] for l in r.stdout.splitlines()[:5]] == ["PASS"] * 5, r.stdout


def save_package(path, name, denoiser, decoder, frames, tokens):
    """Scripts denoiser() and decoder() (weights drawn after torch.manual_seed(0); decoder
    None: a 1x1 Conv3d to RGB and tanh) into a package folder `path` with a model.toml:
    latents [4, frames, 8, 8], `tokens` x 8 conditioning, a 2-step DDIM."""
    import torch
    from torch import nn

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv3d(4, 3, 1)

        def forward(self, z):
            return torch.tanh(self.proj(z))

    decoder = decoder or Decoder
    torch.manual_seed(0)
    path.mkdir()
    torch.jit.script(denoiser().eval()).save(str(path / "denoiser.pt"))
    torch.jit.script(decoder().eval()).save(str(path / "decoder.pt"))
    (path / "model.toml").write_text(
        f'name = "{name}"\n[latent]\nchannels = 4\nframes = {frames}\nheight = 8\nwidth = 8\n'
        f'[cond]\ntokens = {tokens}\ndim = 8\n[sampler]\nkind = "ddim"\nsteps = 2\nguidance = 1.0\n')


def write_frame_dropping_package(path):
    """A package whose decoder drops its first frame when it computes in BF16."""
    import torch
    from torch import nn

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv3d(4, 4, 1)

        def forward(self, x, t, cond):
            return x + 0.1 * self.proj(x) + 0.0 * (t.sum() + cond.sum()).to(x.dtype)

    class Pick(nn.Module):
        def forward(self, y):
            if y.dtype == torch.bfloat16:
                return y[:, :, 1:]
            return y

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv3d(4, 3, 1)
            self.pick = Pick()

        def forward(self, z):
            return torch.tanh(self.pick(self.proj(z)))

    save_package(path, "drops-a-frame", Denoiser, Decoder, frames=4, tokens=2)


def test_a_policy_that_changes_the_frames_shape_is_that_cells_error(tmp_path):
    package = tmp_path / "pkg"
    write_frame_dropping_package(package)
    goldens = tmp_path / "golden"
    common = ("--model", str(package), "--golden-dir", str(goldens), "--threads", "1")
    assert run("golden", "make", *common).returncode == 0
    r = run("check", *common, "--policy", "fp32,bf16", "--json", str(tmp_path / "cells.json"))
    assert r.returncode == 1, r.stdout + r.stderr
    cells = {c["policy"]: c for c in json.loads((tmp_path / "cells.json").read_text())["cells"]}
    assert cells["fp32"]["status"] == "PASS"
    bf16 = cells["bf16"]
    assert bf16["status"] == "ERROR" and bf16["error_class"] == "shape_mismatch", bf16
    assert bf16["reason"] == ("shape_mismatch: frames [3, 8, 8, 3] where the golden and this model in "
                              "FP32 have [4, 8, 8, 3] (in decoder.pick)"), bf16["reason"]
    assert bf16["error_module"] == "decoder.pick"


def write_relative_position_package(path):
    """A package whose attention adds a Swin-style relative position bias, gathered from
    a table by an int64 index buffer."""
    import torch
    from torch import nn

    class Denoiser(nn.Module):
        def __init__(self, channels=4, tokens=128):
            super().__init__()
            self.qkv = nn.Linear(channels, 3 * channels)
            self.out = nn.Linear(channels, channels)
            self.table = nn.Parameter(0.3 * torch.randn(2 * tokens - 1))
            pos = torch.arange(tokens)
            self.register_buffer("index", pos[:, None] - pos[None, :] + tokens - 1)

        def forward(self, x, t, cond):
            b, c, f, h, w = x.shape
            tokens = x.flatten(2).transpose(1, 2)
            q, k, v = self.qkv(tokens).chunk(3, dim=-1)
            scores = q @ k.transpose(1, 2) / 2.0 + self.table[self.index]
            y = self.out(scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, c, f, h, w)
            return 0.3 * y + 0.0 * (t.sum() + cond.sum()).to(x.dtype)

    save_package(path, "relative-position", Denoiser, None, frames=2, tokens=2)


def test_an_integer_buffer_keeps_its_dtype_under_every_policy(tmp_path):
    # LibTorch's Module::to(dtype) would turn the int64 index into float32 ("tensors used
    # as indices must be long"); Python's Module.to leaves it, and so does framegate.
    package = tmp_path / "pkg"
    write_relative_position_package(package)
    goldens = tmp_path / "golden"
    common = ("--model", str(package), "--golden-dir", str(goldens), "--threads", "1")
    made = run("golden", "make", *common)
    assert made.returncode == 0, made.stdout + made.stderr
    r = run("check", *common, "--policy", "fp32,bf16,fp16-emulated,fp8e4m3-bf16", "--json", "-")
    assert r.returncode == 0, r.stdout + r.stderr
    statuses = [c["status"] for c in json.loads(r.stdout)["cells"]]
    assert statuses == ["PASS"] * 4, r.stdout


def golden_then_check(package, goldens, policies):
    """`golden make`, then `check --policy POLICIES --json -` of a package: its cells by policy."""
    common = ("--model", str(package), "--golden-dir", str(goldens), "--threads", "1")
    made = run("golden", "make", *common)
    assert made.returncode == 0, made.stdout + made.stderr
    r = run("check", *common, "--policy", policies, "--json", "-")
    return {c["policy"]: c for c in json.loads(r.stdout)["cells"]}


def write_complex_rope_package(path):
    """A denoiser that rotates its tokens by a RoPE table registered as a complex buffer
    (freqs_cis, as LLaMA-style DiT code keeps it). Python's Module.to(torch.float16) casts a
    complex buffer to a real one, dropping the sines: the rotation is lost under 16 bits."""
    import torch
    from torch import nn

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv3d(4, 4, 1)
            angles = torch.linspace(0.5, 2.5, 2 * 8 * 8 * 2).reshape(2 * 8 * 8, 2)
            self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))

        def forward(self, x, t, cond):
            b, c, f, h, w = x.shape
            tokens = self.proj(x).flatten(2).transpose(1, 2)  # [B, N, 4]
            xc = torch.view_as_complex(tokens.float().reshape(b, f * h * w, 2, 2).contiguous())
            rotated = torch.view_as_real(xc * self.freqs_cis).flatten(2).type_as(x)
            return 0.3 * rotated.transpose(1, 2).reshape(b, c, f, h, w) + 0.0 * (t.sum() + cond.sum()).to(x.dtype)

    save_package(path, "complex-rope", Denoiser, None, frames=2, tokens=2)


def test_a_complex_buffer_is_cast_to_real_as_python_casts_it(tmp_path):
    write_complex_rope_package(tmp_path / "pkg")
    cells = golden_then_check(tmp_path / "pkg", tmp_path / "golden", "fp32,fp16-emulated")
    assert cells["fp32"]["status"] == "PASS", cells["fp32"]  # the model as it is: complex
    fp16 = cells["fp16-emulated"]
    assert fp16["status"] in ("FAIL", "BROKEN_FRAMES"), fp16
    assert "complex tensors cast to Half" in fp16["observed"] and "denoiser.freqs_cis" in fp16["observed"], fp16


def write_noise_augmentation_package(path):
    """A denoiser that draws noise itself (noise augmentation: torch.randn_like in its
    forward), from the global generator."""
    import torch
    from torch import nn

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv3d(4, 4, 1)

        def forward(self, x, t, cond):
            noisy = x + 0.1 * torch.randn_like(x)
            return 0.3 * self.proj(noisy) + 0.0 * (t.sum() + cond.sum()).to(x.dtype)

    save_package(path, "noise-augmentation", Denoiser, None, frames=2, tokens=2)


def test_a_model_that_draws_noise_itself_draws_the_same_in_every_run_of_a_cell(tmp_path):
    write_noise_augmentation_package(tmp_path / "pkg")
    cell = golden_then_check(tmp_path / "pkg", tmp_path / "golden", "fp32")["fp32"]
    assert cell["status"] == "PASS" and cell["metrics"]["rel_l2"] == 0.0, cell


def write_float32_decoder_package(path):
    """A package whose decoder multiplies by a plain float32 tensor attribute (not a
    buffer: module.to(dtype) leaves it), so that its GroupNorm takes a float32 input
    against 16-bit weights, as a real 16-bit run raises."""
    import torch
    from torch import nn

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv3d(4, 4, 1)

        def forward(self, x, t, cond):
            return 0.3 * self.proj(x) + 0.0 * (t.sum() + cond.sum()).to(x.dtype)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv3d(4, 8, 1)
            self.gain = torch.tensor([1.5])
            self.norm = nn.GroupNorm(2, 8)
            self.out = nn.Conv3d(8, 3, 1)

        def forward(self, z):
            return torch.tanh(self.out(self.norm(self.proj(z) * self.gain)))

    save_package(path, "float32-decoder", Denoiser, Decoder, frames=2, tokens=2)


def test_a_float32_input_to_a_16_bit_norm_is_a_dtype_error_the_audit_finds_in_the_decoder(tmp_path):
    package = tmp_path / "pkg"
    write_float32_decoder_package(package)
    goldens = tmp_path / "golden"
    common = ("--model", str(package), "--golden-dir", str(goldens), "--threads", "1")
    assert run("golden", "make", *common).returncode == 0
    r = run("check", *common, "--policy", "fp32,bf16,fp16-emulated", "--json", "-")
    assert r.returncode == 1, r.stdout + r.stderr
    cells = {c["policy"]: c for c in json.loads(r.stdout)["cells"]}
    assert cells["fp32"]["status"] == "PASS"
    for policy in ("bf16", "fp16-emulated"):  # the emulation raises what a real FP16 run raises
        cell = cells[policy]
        assert cell["status"] == "ERROR" and cell["error_class"] == "dtype_mismatch", cell
        assert (cell["error_module"], cell["error_op"]) == ("decoder.norm", "aten::group_norm"), cell
    for policy in ("bf16", "fp16-emulated"):  # the audit decodes too
        r = run("audit", "--model", str(package), "--policy", policy, "--threads", "1")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "traced run failed: dtype_mismatch" in r.stdout, r.stdout
        # the product by the float32 attribute `gain` is where the float32 came from
        assert "(in decoder.norm, aten::group_norm; its float32 operand became float32 at decoder (aten::mul))" \
            in r.stdout, r.stdout


def write_time_upsampling_package(path):
    """A package whose decoder upsamples in time, as causal video VAEs do: 2 latent frames
    decode to 4 + 1."""
    import torch
    from torch import nn

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv3d(4, 4, 1)

        def forward(self, x, t, cond):
            return 0.3 * self.proj(x) + 0.0 * (t.sum() + cond.sum()).to(x.dtype)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv3d(4, 3, 1)

        def forward(self, z):
            h = self.proj(torch.nn.functional.interpolate(z, scale_factor=(2.0, 2.0, 2.0), mode="nearest"))
            return torch.tanh(torch.cat([h[:, :, :1], h], dim=2))

    save_package(path, "time-upsampling", Denoiser, Decoder, frames=2, tokens=2)


def test_a_decoder_that_upsamples_in_time_is_checked_on_all_its_frames(tmp_path):
    package = tmp_path / "pkg"
    write_time_upsampling_package(package)
    goldens = tmp_path / "golden"
    common = ("--model", str(package), "--golden-dir", str(goldens), "--threads", "1")
    made = run("golden", "make", *common)
    assert made.returncode == 0, made.stdout + made.stderr
    r = run("check", *common, "--policy", "fp32,bf16", "--json", "-")
    assert r.returncode == 0, r.stdout + r.stderr
    cells = json.loads(r.stdout)["cells"]
    assert [c["status"] for c in cells] == ["PASS", "PASS"], r.stdout
    assert all(len(c["health"]["frames"]) == 5 for c in cells), cells[0]["health"]


def write_replicate_pad_package(path, offset):
    """A decoder that pads time by replication (F.pad mode="replicate", as causal video VAEs
    do), which torch 1.13's CPU has no BF16 kernel for, then adds and subtracts `offset`:
    with 2048, BF16 (spacing 16 there) rounds the latents away; with 0, healthy."""
    import torch
    from torch import nn
    import torch.nn.functional as F

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(4, 4, 1)

        def forward(self, x, t, cond):
            return 0.3 * self.conv(x) + 0.0 * t.sum().to(x.dtype) + 0.0 * cond.sum()

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.temporal = nn.Conv3d(4, 4, (2, 1, 1))
            self.proj = nn.Conv3d(4, 3, 1)
            self.offset = offset

        def forward(self, z):
            h = self.temporal(F.pad(z, (0, 0, 0, 0, 1, 0), mode="replicate"))
            h = (h + self.offset) - self.offset
            return torch.tanh(self.proj(h))

    save_package(path, "replicate-pad", Denoiser, Decoder, frames=2, tokens=2)


def test_an_op_without_a_kernel_in_the_policys_dtype_runs_in_fp32_so_the_rest_is_judged(tmp_path):
    # torch 1.13's CPU has no BF16 replication_pad3d; LibTorch 2.x has one (no fallback).
    cells = {}
    for name, offset in (("healthy", 0.0), ("defect", 2048.0)):
        write_replicate_pad_package(tmp_path / name, offset)
        cells[name] = golden_then_check(tmp_path / name, tmp_path / "golden", "fp32,bf16")
        assert cells[name]["fp32"]["status"] == "PASS", cells[name]["fp32"]
    healthy, defect = cells["healthy"]["bf16"], cells["defect"]["bf16"]
    if "replication_pad3d" not in healthy["reason"]:
        assert healthy["status"] == "PASS" and defect["status"] in ("FAIL", "BROKEN_FRAMES"), (healthy, defect)
        return
    # Not claimed to pass where the op cannot run, but judged: the defect is found.
    assert healthy["status"] == "UNSUPPORTED", healthy
    assert "the rest of the model passes with decoder:aten::pad in FP32" in healthy["reason"], healthy
    assert defect["status"] in ("FAIL", "BROKEN_FRAMES"), defect
    assert "judged with decoder:aten::pad in FP32" in defect["observed"], defect


def write_masked_fill_package(path):
    """A package whose attention masks padded text tokens with masked_fill(-1e9): fine in
    float32 and bfloat16, an overflow a real FP16 run raises."""
    import torch
    from torch import nn

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(4, 8)
            self.kv = nn.Linear(8, 16)
            self.out = nn.Linear(8, 4)

        def forward(self, x, t, cond):
            b, c, f, h, w = x.shape
            tokens = x.flatten(2).transpose(1, 2)
            k, v = self.kv(cond).chunk(2, dim=-1)
            scores = self.q(tokens) @ k.transpose(1, 2) / 2.0
            padded = (torch.arange(cond.shape[1]) >= 1)[None, None, :]
            probs = scores.masked_fill(padded, -1000000000.0).softmax(dim=-1)
            y = self.out(probs @ v).transpose(1, 2).reshape(b, c, f, h, w)
            return 0.3 * y + 0.0 * t.sum().to(x.dtype)

    save_package(path, "masked-fill", Denoiser, None, frames=2, tokens=3)


def test_a_fill_constant_beyond_fp16_is_the_error_a_real_fp16_run_raises_and_advise_cures_it(tmp_path):
    package = tmp_path / "pkg"
    write_masked_fill_package(package)
    goldens = tmp_path / "golden"
    common = ("--model", str(package), "--golden-dir", str(goldens), "--threads", "1")
    assert run("golden", "make", *common).returncode == 0
    r = run("check", *common, "--policy", "fp32,bf16,fp16-emulated", "--json", "-")
    cells = {c["policy"]: c for c in json.loads(r.stdout)["cells"]}
    assert [cells[p]["status"] for p in ("fp32", "bf16")] == ["PASS", "PASS"], r.stdout
    fp16 = cells["fp16-emulated"]
    assert fp16["status"] == "ERROR" and fp16["error_class"] == "value_overflow", fp16["reason"]
    assert (fp16["error_module"], fp16["error_op"]) == ("denoiser", "aten::masked_fill"), fp16["reason"]
    out = tmp_path / "advice.json"
    r = run("advise", *common, "--policy", "fp16-emulated", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    advice = json.loads(out.read_text())
    assert advice["status_after"] == "PASS", advice["runs"]
    assert "denoiser:aten::masked_fill" in advice["islands"], advice["islands"]
    assert advice["fp32_weight_fraction"] == 0.0, advice
