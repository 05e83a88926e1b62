"""`framegate generate` and `framegate info` driven as real subprocesses."""
import hashlib
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")


def run(*args, check=True):
    return subprocess.run([FRAMEGATE, *args], capture_output=True, text=True, check=check)


def digest(folder):
    files = sorted(p for p in pathlib.Path(folder).iterdir() if p.suffix in (".png", ".npy"))
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_generate_tiny_writes_frames_and_repeats_bit_identically(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    run("generate", "--size", "tiny", "--seed", "0", "--out", str(a))
    run("generate", "--size", "tiny", "--seed", "0", "--out", str(b))
    frames = np.load(a / "frames.npy")
    assert frames.dtype == np.float32 and frames.ndim == 4 and frames.shape[3] == 3
    assert frames.shape[0] >= 8
    assert len(list(a.glob("frame_*.png"))) == frames.shape[0]
    assert 0.0 <= frames.min() and frames.max() <= 1.0
    assert frames.std() > 0.05, "frames are blank or flat gray"
    assert digest(a) == digest(b), "a repeat run must give identical bytes"
    record = json.loads((a / "generation.json").read_text())
    assert record["pipeline"] == "reference:tiny" and len(record["step_seconds"]) == 8


def test_generate_rejects_bad_input_with_exit_2(tmp_path):
    r = run("generate", "--size", "enormous", "--out", str(tmp_path), check=False)
    assert r.returncode == 2
    assert "unknown size 'enormous'" in r.stderr and r.stderr.count("\n") == 1
    r = run("generate", "--device", "tpu:0", "--out", str(tmp_path), check=False)
    assert r.returncode == 2 and "tpu:0" in r.stderr
    r = run("generate", "--no-such-flag", check=False)
    assert r.returncode == 2


def test_every_subcommand_has_help():
    for command in ("generate", "info"):
        r = run(command, "--help")
        assert r.returncode == 0 and "--threads" in r.stdout


def test_info_reports_libtorch_blas_threads_and_cpu():
    info = json.loads(run("info", "--json", "--threads", "1").stdout)
    assert info["libtorch"].startswith(("1.", "2."))
    assert info["threads"] == 1
    assert "blas" in info["blas"] or "openblas" in info["blas"]
    assert info["devices"][0]["device"] == "cpu" and info["devices"][0]["cores"] >= 1
