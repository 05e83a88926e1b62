"""Inputs from the fault hunt of issue 21 that crashed, hung or were read wrong, through the
real `framegate` binary: TOML bombs, huge or endless or blocking video files, a duplicated
.npy header key, empty videos, Inf pixels, model.toml numbers, a denoiser that changes its
output's shape, and goldens whose shapes are not the cell's. Bad input gives exit code 2
and ONE stderr line "framegate: error: ..." naming the file and the problem.
"""
import hashlib
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")
sys.path.insert(0, str(SOURCE / "pipelines" / "crosscheck"))
import make_crosscheck_package as pkg  # noqa: E402
import torch  # noqa: E402

FAST = ("--steps", "2", "--threads", "1")
# Only a safety net: each command here must answer at once; a hang fails, never blocks CI.
SAFETY_TIMEOUT_S = 120


def run(*args):
    return subprocess.run([FRAMEGATE, *map(str, args)], capture_output=True, text=True,
                          timeout=SAFETY_TIMEOUT_S)


def one_line_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr[-2000:])
    assert r.stderr.startswith("framegate: error: ") and r.stderr.count("\n") == 1, r.stderr[-2000:]
    for fragment in fragments:
        assert str(fragment) in r.stderr, (fragment, r.stderr)


def video(frames=3, h=16, w=16):
    rng = np.random.default_rng(0)
    return rng.uniform(0.1, 0.9, size=(frames, h, w, 3)).astype(np.float32)


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return pathlib.Path(pkg.write_package(str(tmp_path_factory.mktemp("pkg") / "good")))


def copy_package(good, tmp_path, name="pkg"):
    d = tmp_path / name
    shutil.copytree(good, d)
    return d


# ---- 1. TOML nesting bombs: toml++ overflowed its stack (SIGSEGV) -------------------------

DOTTED_BOMB = "[" + ".".join(["a"] * 300000) + "]\nx = 1\n"


def test_toml_bomb_in_a_matrix_is_one_line(tmp_path):
    matrix = tmp_path / "bomb.toml"
    matrix.write_text(DOTTED_BOMB)
    one_line_error(run("list", matrix), f"{matrix}:1:", "nested deeper than 64 levels")
    arrays = tmp_path / "arrays.toml"
    arrays.write_text("x = " + "[" * 200000 + "]" * 200000 + "\n")
    one_line_error(run("list", arrays), f"{arrays}:1:", "nested deeper")


def test_toml_bomb_in_model_toml_is_one_line(package, tmp_path):
    d = copy_package(package, tmp_path)
    (d / "model.toml").write_text((d / "model.toml").read_text() + DOTTED_BOMB)
    one_line_error(run("check", "--model", d, "--golden-dir", tmp_path / "g", *FAST),
                   f"{d}/model.toml:", "nested deeper")


def test_toml_bomb_in_a_policy_file_is_one_line(tmp_path):
    policies = tmp_path / "policies.toml"
    policies.write_text("x = " + "{a = " * 100000 + "1" + "}" * 100000 + "\n")
    one_line_error(run("check", "--size", "tiny", "--policy", "mine", "--policy-file", policies,
                       "--golden-dir", tmp_path / "g", *FAST), f"{policies}:1:", "nested deeper")


# ---- 2, 3. video files: huge PNG headers, endless devices, FIFOs ---------------------------

def png_declaring(width, height):
    """A valid PNG signature, IHDR (8-bit RGB) declaring width x height, one tiny IDAT, IEND."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
            + chunk(b"IEND", b""))


def test_png_header_declaring_a_trillion_pixels(tmp_path):
    # 10^12 pixels: an uncaught std::bad_alloc (rc 134) before.
    for folder in ("ref", "cand"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "frame_0000.png").write_bytes(png_declaring(1000000, 1000000))
    one_line_error(run("metrics", tmp_path / "ref", tmp_path / "cand"),
                   tmp_path / "ref" / "frame_0000.png", "1000000x1000000")
    # Within the pixel limit, but more than 120 bytes can hold.
    (tmp_path / "ref" / "frame_0000.png").write_bytes(png_declaring(10000, 10000))
    one_line_error(run("metrics", tmp_path / "ref", tmp_path / "cand"),
                   tmp_path / "ref" / "frame_0000.png", "10000x10000", "can hold")


def test_metrics_of_dev_zero_is_one_line(tmp_path):
    # /dev/zero never ends: read until std::bad_alloc before.
    np.save(tmp_path / "x.npy", video())
    one_line_error(run("metrics", "/dev/zero", tmp_path / "x.npy"), "/dev/zero: not a regular file")


def test_metrics_of_a_fifo_answers_at_once(tmp_path):
    # No one ever writes the FIFO: opening it blocked forever before. The timeout of run()
    # is only a safety net; the command must answer without waiting for a writer.
    np.save(tmp_path / "x.npy", video())
    fifo = tmp_path / "frames.npy"
    os.mkfifo(fifo)
    one_line_error(run("metrics", fifo, tmp_path / "x.npy"), f"{fifo}: not a regular file (a FIFO)")
    one_line_error(run("metrics", tmp_path / "x.npy", fifo), f"{fifo}: not a regular file (a FIFO)")
    frames = tmp_path / "frames"
    frames.mkdir()
    os.mkfifo(frames / "frame_0000.png")
    one_line_error(run("metrics", frames, frames), f"{frames}/frame_0000.png: not a regular file")


# ---- 4. a .npy header with a duplicated key ----------------------------------------------

def test_npy_header_with_a_duplicated_key_is_refused(tmp_path):
    # NumPy keeps the last 'descr' ('<u1': 48 values); framegate read the first ('<f4').
    np.save(tmp_path / "ref.npy", np.zeros((1, 2, 2, 3), np.float32))
    header = "{'descr': '<f4', 'descr': '<u1', 'fortran_order': False, 'shape': (4, 2, 2, 3), }"
    header = header.ljust(118) + "\n"
    data = np.zeros(48, np.uint8).tobytes()
    bad = tmp_path / "dup.npy"
    bad.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
    assert np.load(bad).dtype == np.uint8  # what NumPy reads
    one_line_error(run("metrics", tmp_path / "ref.npy", bad), bad, "'descr' appears twice")


# ---- 5. empty videos ----------------------------------------------------------------------

def test_metrics_of_two_empty_videos_is_refused(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((0, 8, 8, 3), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((0, 8, 8, 3), np.float32))
    one_line_error(run("metrics", tmp_path / "a.npy", tmp_path / "b.npy"),
                   tmp_path / "a.npy", "empty video [0, 8, 8, 3]")
    np.save(tmp_path / "c.npy", np.zeros((2, 0, 8, 3), np.float32))
    one_line_error(run("metrics", tmp_path / "c.npy", tmp_path / "c.npy", "--json", "-"), "empty video")


# ---- 6. Inf pixels ------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["candidate", "both"])
def test_an_inf_pixel_never_scores_as_agreement(tmp_path, where):
    ref = video()
    cand = ref.copy()
    cand[1, 2, 3, 0] = np.inf
    if where == "both":
        ref[1, 2, 3, 0] = np.inf
    np.save(tmp_path / "ref.npy", ref)
    np.save(tmp_path / "cand.npy", cand)
    r = run("metrics", tmp_path / "ref.npy", tmp_path / "cand.npy")
    assert r.returncode == 0, r.stderr  # metrics measures; its numbers must say "not defined"
    summary = next(l for l in r.stdout.splitlines() if l.startswith("min_psnr"))
    assert summary.startswith("min_psnr nan dB"), r.stdout
    assert "cosine nan" in summary, r.stdout
    frame_1 = r.stdout.splitlines()[2].split()
    assert frame_1[:2] == ["1", "nan"], r.stdout
    assert "candidate health: nonfinite (1 frames), 0 NaN, 1 Inf" in r.stdout, r.stdout
    j = json.loads(run("metrics", tmp_path / "ref.npy", tmp_path / "cand.npy", "--json", "-").stdout)
    assert j["min_psnr"] == "NaN" and j["frames"][1]["psnr"] == "NaN", j
    assert j["frames"][0]["psnr"] is None  # frame 0 is identical: +inf, null
    assert j["cosine"] == "NaN", j
    assert j["health"]["defect"] == "nonfinite" and j["health"]["inf"] == 1, j


# ---- 7. model.toml numbers ----------------------------------------------------------------

def with_line(d, key, value):
    lines = (d / "model.toml").read_text().splitlines()
    index = next(i for i, l in enumerate(lines) if l.startswith(key + " "))
    lines[index] = f"{key} = {value}"
    (d / "model.toml").write_text("\n".join(lines) + "\n")
    return index + 1


@pytest.mark.parametrize("key,value,words", [
    ("steps", "4294967299", "[sampler] steps must be a positive integer, at most 10000, not 4294967299"),
    ("steps", "0", "[sampler] steps must be a positive integer, at most 10000, not 0"),
    ("steps", "2.0", "[sampler] steps must be a positive integer, at most 10000"),
    ("frames", "-4", "[latent] frames must be a positive integer, at most 4096, not -4"),
    ("channels", "9223372036854775807", "[latent] channels must be a positive integer, at most 4096"),
    ("tokens", "100000", "[cond] tokens must be a positive integer, at most 4096"),
    ("guidance", "nan", "[sampler] guidance must be a number from 1 to 100"),
    ("guidance", "1000.0", "[sampler] guidance must be a number from 1 to 100"),
])
def test_model_toml_numbers_are_range_checked(package, tmp_path, key, value, words):
    d = copy_package(package, tmp_path)
    line = with_line(d, key, value)
    r = run("check", "--model", d, "--golden-dir", tmp_path / "g", *FAST)
    one_line_error(r, f"{d}/model.toml:{line}:", words)


# ---- 8. a denoiser whose output's shape changes after the contract check ------------------

class ShapeShiftingDenoiser(torch.nn.Module):
    """Right shape on its first call (the contract check), one frame after: broadcast."""
    calls: int

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.scale = torch.nn.Parameter(torch.tensor(0.1))

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > 1:
            return x[:, :, :1] * self.scale
        return x * self.scale


def test_a_denoiser_that_changes_its_output_shape_is_an_error(package, tmp_path):
    d = copy_package(package, tmp_path)
    torch.jit.script(ShapeShiftingDenoiser()).save(str(d / "denoiser.pt"))
    out = tmp_path / "cells.json"
    r = run("check", "--model", d, "--golden-dir", tmp_path / "g", *FAST, "--json", out)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    cell = json.loads(out.read_text())["cells"][0]
    assert cell["status"] == "ERROR", cell
    b, c, t, h, w = 2, pkg.CHANNELS, pkg.FRAMES, pkg.HEIGHT, pkg.WIDTH  # CFG: a batch of 2
    assert (f"step 0: the denoiser returned shape [{b}, {c}, 1, {h}, {w}] for latents of shape "
            f"[{b}, {c}, {t}, {h}, {w}]") in cell["reason"], cell["reason"]
    assert "ERROR" in r.stdout and "step 0" in r.stdout, r.stdout


# ---- 9. goldens whose shapes are not the cell's ------------------------------------------

def read_golden(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {}
    for name in (key for key in header if key != "__metadata__"):
        begin, end = header[name]["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], np.float32).reshape(header[name]["shape"])
    return header, tensors


def write_golden(path, header, tensors):
    """Rewrites the golden at `path` with new tensors, and its sha256 in MANIFEST.json (a
    consistent store, as a golden made by another config would be: a version 2 golden's
    step latents follow its latents' shape)."""
    if "trajectory" in tensors and tensors["trajectory"].shape[1:] != tensors["latents"].shape:
        steps = tensors["trajectory"].shape[0]
        tensors["trajectory"] = np.ascontiguousarray(
            np.broadcast_to(tensors["latents"], (steps,) + tensors["latents"].shape))
    body, offset = b"", 0
    for name in ("frames", "latents", "trajectory"):
        if name not in tensors:
            continue
        data = np.ascontiguousarray(tensors[name], np.float32)
        header[name] = {"dtype": "F32", "shape": list(data.shape), "data_offsets": [offset, offset + data.nbytes]}
        body += data.tobytes()
        offset += data.nbytes
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)
    manifest_path = path.parent / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["goldens"][path.name]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest, indent=2))


@pytest.fixture(scope="module")
def tiny_golden_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("golden")
    r = run("golden", "make", "--size", "tiny", "--golden-dir", d, *FAST)
    assert r.returncode == 0, r.stderr
    return d


@pytest.mark.parametrize("change", ["larger", "tiny", "frames"])
def test_a_golden_of_another_shape_is_one_line(tiny_golden_dir, tmp_path, change):
    goldens = tmp_path / "golden"
    shutil.copytree(tiny_golden_dir, goldens)
    golden = next(goldens.glob("*.safetensors"))
    header, tensors = read_golden(golden)
    latents = tensors["latents"]
    made = latents.shape
    if change == "larger":  # read past the cell's latents: SIGSEGV before
        tensors["latents"] = np.ones((1, made[1] * 4, made[2], made[3] * 8, made[4] * 8), np.float32)
        words = f"golden latents [1, {made[1] * 4}, {made[2]}, {made[3] * 8}, {made[4] * 8}]"
    elif change == "tiny":  # the cosine of a few values: PASS before
        tensors["latents"] = latents.reshape(-1)[:2].reshape(1, 1, 1, 1, 2).copy()
        words = "golden latents [1, 1, 1, 1, 2]"
    else:
        tensors["frames"] = tensors["frames"][:1].copy()
        words = "golden frames [1, "
    write_golden(golden, header, tensors)
    r = run("check", "--size", "tiny", "--golden-dir", goldens, *FAST)
    one_line_error(r, golden, words, "but the cell made [")
    if change != "frames":
        assert f"the cell made [{', '.join(map(str, made))}]" in r.stderr, r.stderr
