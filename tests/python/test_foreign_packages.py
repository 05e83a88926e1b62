"""The foreign packages (pipelines/examples/make_foreign_packages.py: designs, idioms and
initialisation the zoo and the default bounds never saw) through the real `framegate check`,
seed 0, every policy: the clean ones PASS everywhere; the traced twins whose trace baked
float32 in (a `.to(x.dtype)`, a `.type_as` of a `.float()`) are ERROR dtype_mismatch in the
module a real run raises in; the planted ones are NONFINITE under fp16-emulated in the module
whose attention logits overflow, inside an nn.TransformerEncoderLayer whose fused fast path
would hide them, or inside scaled_dot_product_attention.

These packages found three wrong verdicts that the zoo did not: a BF16 ConvTranspose2d left
to LibTorch 1.13's CPU kernel (a wrong shape, then exit 2 for the whole check), a shape
change that discarded every cell, and 8x8 frames that FAILed FP32 on `min_ssim nan`."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
MAKE = SOURCE / "pipelines" / "examples" / "make_foreign_packages.py"
POLICIES = ["fp32", "bf16", "fp16-emulated", "fp8e4m3-bf16", "fp8e5m2-bf16"]


def table():
    if not FRAMEGATE:
        return {}
    out = subprocess.run([sys.executable, str(MAKE), "--list"], check=True, capture_output=True,
                         text=True, timeout=300).stdout
    return {row["name"]: row for row in json.loads(out)}


TABLE = table()


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    root = tmp_path_factory.mktemp("foreign")
    subprocess.run([sys.executable, str(MAKE), str(root)], check=True, capture_output=True, timeout=600)
    return root


@pytest.mark.parametrize("name", sorted(TABLE))
def test_each_policy_gets_its_expected_status(packages, tmp_path, name):
    row = TABLE[name]
    common = ["--model", str(packages / name), "--golden-dir", str(tmp_path), "--threads", "1"]
    made = subprocess.run([FRAMEGATE, "golden", "make", *common], capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr
    r = subprocess.run([FRAMEGATE, "check", *common, "--policy", ",".join(POLICIES), "--json", "-"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 1), r.stderr
    cells = {c["policy"]: c for c in json.loads(r.stdout)["cells"]}
    for policy in POLICIES:
        cell = cells[policy]
        assert cell["status"] == row["expected"][policy], (policy, cell["reason"])
        if cell["status"] == "ERROR":
            assert cell["error_class"] == "dtype_mismatch", cell["reason"]
            assert cell["error_module"] == row["error_module"], cell["reason"]
        if cell["status"] == "NONFINITE":
            assert f"in {row['error_module']} (" in cell["reason"], cell["reason"]


def test_advice_for_the_qk_overflow_is_the_attention_module_alone(packages, tmp_path):
    """nn.MultiheadAttention returns a tuple: an island on it hands its float32 output back
    to FP16 through the tuple (it used to leak float32 on, and advise grew past the culprit
    chasing the dtype errors that made: 12 runs, 8.8% of the weights). With torch 2.x the
    layer's own path computes the attention by scaled_dot_product_attention, which framegate
    computes by its math path's ops (logits explicit) under a policy without a backend."""
    common = ["--model", str(packages / "latte-nn-qk-overflow"), "--golden-dir", str(tmp_path),
              "--threads", "1"]
    made = subprocess.run([FRAMEGATE, "golden", "make", *common], capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr
    r = subprocess.run([FRAMEGATE, "advise", *common, "--policy", "fp16-emulated", "--json", "-"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    advice = json.loads(r.stdout)
    assert advice["status_before"] == "NONFINITE"
    assert advice["status_after"] == "PASS"
    assert advice["islands"] == ["denoiser.blocks.1.spatial.self_attn"]
    assert advice["fp32_weight_fraction"] == pytest.approx(advice["culprit_weight_fraction"])
