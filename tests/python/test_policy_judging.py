"""How a cell is judged when its policy or its FP64 reference is unusual (issue 22): a policy
without `based_on` is judged by the profile its flags imply (or its `tolerance` key) and
runs; an unknown tolerance is a parse-time error with the place; an FP64 reference that
raises is recorded on the cell and never discards the check."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
MAKE_PACKAGES = SOURCE / "pipelines" / "examples" / "make_example_packages.py"
AXES = '[axes]\npipelines = ["tiny"]\ndevices = ["cpu"]\nseeds = [0]\n'  # lines 1-4


def run(*args, cwd=None):
    return subprocess.run([FRAMEGATE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def one_line_error(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("framegate: error: ") and r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_a_matrix_policy_without_based_on_runs_and_is_judged(tmp_path):
    matrix = tmp_path / "m.toml"
    matrix.write_text(AXES + 'policies = ["mybf16", "myfp8", "strict"]\n'
                      '[policy.mybf16]\nstorage = "bf16"\ncompute = "bf16"\nfp32_modules = ["decoder"]\n'
                      '[policy.myfp8]\nstorage = "fp8e4m3"\ncompute = "bf16"\n'
                      '[policy.strict]\nstorage = "bf16"\ncompute = "bf16"\ntolerance = "fp32"\n')
    out = tmp_path / "run.json"
    r = run("run", matrix, "--golden-dir", SOURCE / "golden", "--threads", "1", "--json", out, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr  # "strict": bf16 judged by the fp32 profile
    cells = {c["policy"]: c for c in json.loads(out.read_text())["cells"]}
    assert cells["mybf16"]["status"] == "PASS", cells["mybf16"]["reason"]
    assert cells["myfp8"]["status"] == "PASS", cells["myfp8"]["reason"]
    assert cells["strict"]["status"] == "FAIL" and "min_psnr" in cells["strict"]["reason"]


def test_an_unknown_or_unimplied_tolerance_is_refused_at_parse_time_with_the_place(tmp_path):
    matrix = tmp_path / "m.toml"
    matrix.write_text(AXES + 'policies = ["mine"]\n[policy.mine]\ncompute = "bf16"\ntolerance = "tight"\n')
    one_line_error(run("list", matrix), f"{matrix}:8:13: policy 'mine': tolerance: unknown tolerance profile 'tight'")
    matrix.write_text(AXES + 'policies = ["mine"]\n[policy.mine]\nstorage = "bf16"\ncompute = "fp16"\n')
    one_line_error(run("list", matrix), f"{matrix}:6:1: policy 'mine': no tolerance profile is implied")


@pytest.fixture(scope="module")
def f1_package(tmp_path_factory):
    root = tmp_path_factory.mktemp("packages")
    subprocess.run([sys.executable, str(MAKE_PACKAGES), str(root), "--only", "f1-time-embed"], check=True,
                   capture_output=True, timeout=300)
    r = run("golden", "make", "--model", root / "f1-time-embed", "--golden-dir", root / "goldens",
            "--threads", "1")
    assert r.returncode == 0, r.stderr
    return root


def test_an_fp64_reference_that_raises_is_recorded_on_the_cells_and_keeps_the_check(f1_package, tmp_path):
    # f1-time-embed feeds a float32 sinusoid into time_mlp: under FP64 weights it raises.
    out = tmp_path / "cells.json"
    r = run("check", "--model", f1_package / "f1-time-embed", "--policy", "fp32", "--fp64-ref",
            "--golden-dir", f1_package / "goldens", "--threads", "1", "--json", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fp64_error_ratio not measured: the FP64 reference run failed" in r.stdout
    [cell] = json.loads(out.read_text())["cells"]
    assert cell["status"] == "PASS"
    assert "fp64_error_ratio" not in cell["metrics"]
    assert "fp64_error_ratio not measured: the FP64 reference run failed" in cell["observed"]
    # With a failing cell beside it, the exit code is the verdict's and every cell is kept.
    r = run("check", "--model", f1_package / "f1-time-embed", "--policy", "fp32,bf16", "--fp64-ref",
            "--golden-dir", f1_package / "goldens", "--threads", "1", "--json", out)
    assert r.returncode == 1, r.stdout + r.stderr
    cells = {c["policy"]: c["status"] for c in json.loads(out.read_text())["cells"]}
    assert cells == {"fp32": "PASS", "bf16": "ERROR"}
