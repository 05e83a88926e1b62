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
    for command in ("audit", "generate", "info"):
        r = run(command, "--help")
        assert r.returncode == 0 and "--threads" in r.stdout


def test_info_reports_libtorch_blas_threads_and_cpu():
    info = json.loads(run("info", "--json", "-", "--threads", "1").stdout)
    assert info["libtorch"].startswith(("1.", "2."))
    assert info["threads"] == 1
    assert "blas" in info["blas"] or "openblas" in info["blas"]
    assert info["devices"][0]["device"] == "cpu" and info["devices"][0]["cores"] >= 1


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    out = tmp_path_factory.mktemp("pkg") / "crosscheck"
    source = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
    subprocess.run(["/usr/bin/python3", str(source / "pipelines/crosscheck/make_crosscheck_package.py"),
                    str(out)], check=True, capture_output=True)
    return out


@pytest.mark.parametrize("policy", ["fp32", "bf16"])
def test_model_package_runs_under_fp32_and_bf16(package, tmp_path, policy):
    r = run("generate", "--model", str(package), "--policy", policy, "--out", str(tmp_path), "--threads", "1")
    assert r.returncode == 0, r.stderr
    frames = np.load(tmp_path / "frames.npy")
    assert np.isfinite(frames).all() and frames.std() > 0.01
    record = json.loads((tmp_path / "generation.json").read_text())
    assert record["policy"] == policy
    assert record["accumulation"]["applicable"] is False  # CUDA-only flags, recorded on the CPU


def cpu_has_fp16_compute():
    """Whether the LibTorch framegate runs on has FP16 convolution/matmul on the CPU (2.2
    on; harness/torch_version.h, kCpuHasFp16Compute)."""
    version = json.loads(run("info", "--json", "-").stdout)["libtorch"]
    return tuple(int(part) for part in version.split(".")[:2]) >= (2, 2)


def test_model_package_fp16_on_cpu_runs_or_is_unsupported_not_a_crash(package, tmp_path):
    r = run("generate", "--model", str(package), "--policy", "fp16", "--out", str(tmp_path), "--threads", "1",
            check=False)
    if cpu_has_fp16_compute():
        assert r.returncode == 0, r.stderr
        assert np.isfinite(np.load(tmp_path / "frames.npy")).all()
    else:
        assert r.returncode == 1
        assert "unsupported_op" in r.stderr and "not implemented for 'Half'" in r.stderr


def test_broken_packages_give_one_line_errors_naming_the_file(package, tmp_path):
    import shutil
    broken = tmp_path / "broken"
    shutil.copytree(package, broken)
    (broken / "decoder.pt").unlink()
    r = run("generate", "--model", str(broken), "--out", str(tmp_path / "o"), check=False)
    assert r.returncode == 2 and "decoder.pt: file is missing" in r.stderr and r.stderr.count("\n") == 1
    (broken / "decoder.pt").write_bytes(b"this is not torchscript")
    r = run("generate", "--model", str(broken), "--out", str(tmp_path / "o"), check=False)
    assert r.returncode == 2 and "decoder.pt: not a loadable TorchScript module" in r.stderr
    assert r.stderr.count("\n") == 1
    shutil.copy(package / "decoder.pt", broken / "decoder.pt")
    (broken / "model.toml").write_text((package / "model.toml").read_text().replace("channels", "chanels"))
    r = run("generate", "--model", str(broken), "--out", str(tmp_path / "o"), check=False)
    assert r.returncode == 2 and "model.toml: [latent] channels must be a positive integer" in r.stderr
    (broken / "model.toml").write_text("name = [unclosed\n")
    r = run("generate", "--model", str(broken), "--out", str(tmp_path / "o"), check=False)
    assert r.returncode == 2 and "model.toml:1:" in r.stderr


def test_audit_names_the_offending_modules_and_exits_1():
    r = run("audit", "--policy", "bf16", "--fault", "time-embed-fp32", "--threads", "1", check=False)
    assert r.returncode == 1
    assert "time_embed.0.weight: fp32, policy wants bf16" in r.stdout
    assert "time_embed.0: input bf16, weight fp32" in r.stdout
    r = run("audit", "--policy", "bf16", "--fault", "input-fp32", "--threads", "1", check=False)
    assert r.returncode == 1 and "patch_embed: input fp32, weight bf16" in r.stdout
    r = run("audit", "--policy", "bf16", "--threads", "1", check=False)
    assert r.returncode == 0 and "clean" in r.stdout


def test_audit_of_a_package(package):
    r = run("audit", "--model", str(package), "--policy", "bf16", check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_info_reports_weight_bytes_per_policy_fp8_a_quarter_of_fp32():
    info = json.loads(run("info", "--json", "-", "--policy", "fp32", "--policy", "fp8e4m3-bf16",
                          "--policy", "bf16").stdout)
    rows = {row["policy"]: row for row in info["policies"]}
    assert rows["fp8e4m3-bf16"]["weight_bytes"] * 4 == rows["fp32"]["weight_bytes"]
    assert rows["bf16"]["weight_bytes"] * 2 == rows["fp32"]["weight_bytes"]
    r = run("info", "--policy", "fp13", check=False)
    assert r.returncode == 2 and "unknown policy 'fp13'" in r.stderr
