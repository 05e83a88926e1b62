"""A user's own model gets the full diagnosis: the real `framegate` binary on the example
packages (pipelines/examples/make_example_packages.py), whose failures sit in nested
submodules. Each field report is an ERROR or NONFINITE cell naming the module and op, the
audit finds F1 and F4 from one traced step, and `advise` returns FP32 islands whose policy,
pasted into a matrix file, makes the failing cell pass."""
import json
import os
import pathlib
import sqlite3
import subprocess
import sys

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
MAKE_PACKAGES = SOURCE / "pipelines" / "examples" / "make_example_packages.py"


def run(*args, cwd=None, threads=True):
    return subprocess.run([FRAMEGATE, *map(str, args), *(["--threads", "1"] if threads else [])],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    root = tmp_path_factory.mktemp("packages")
    for form in ("scripted", "traced"):
        extra = ["--traced"] if form == "traced" else []
        subprocess.run([sys.executable, str(MAKE_PACKAGES), str(root / form), *extra], check=True,
                       capture_output=True, timeout=300)
    goldens = root / "goldens"
    for form in ("scripted", "traced"):
        for name in ("clean", "f1-time-embed", "f3-ff-overflow", "f4-input-fp32"):
            r = run("golden", "make", "--model", root / form / name, "--golden-dir", goldens)
            assert r.returncode == 0, r.stderr
    return root


def check(packages, name, policies, form="scripted", *extra):
    out = packages / f"{form}-{name}-{policies}.json"
    r = run("check", "--model", packages / form / name, "--policy", policies,
            "--golden-dir", packages / "goldens", "--json", out, *extra)
    assert r.returncode in (0, 1), r.stderr
    return r, {c["policy"]: c for c in json.loads(out.read_text())["cells"]}


@pytest.mark.parametrize("form", ["scripted", "traced"])
@pytest.mark.parametrize("name,module,op", [
    ("f1-time-embed", "denoiser.embed.time_mlp.0", "aten::linear"),
    ("f4-input-fp32", "denoiser.conv_in", None),  # conv3d scripted, _convolution traced
])
def test_a_dtype_mismatch_under_bf16_is_an_error_cell_naming_module_and_op(packages, form, name,
                                                                            module, op):
    r, cells = check(packages, name, "fp32,bf16", form)
    assert r.returncode == 1
    assert cells["fp32"]["status"] == "PASS"
    bf16 = cells["bf16"]
    assert bf16["status"] == "ERROR" and bf16["error_class"] == "dtype_mismatch"
    assert bf16["error_module"] == module
    assert bf16["error_op"] in ((op,) if op else ("aten::conv3d", "aten::_convolution"))
    assert f"(in {module}, " in bf16["reason"]


@pytest.mark.parametrize("form", ["scripted", "traced"])
def test_an_overflow_inside_a_nested_module_is_nonfinite_only_under_fp16_emulation(packages, form):
    r, cells = check(packages, "f3-ff-overflow", "fp32,bf16,fp16-emulated", form)
    assert [cells[p]["status"] for p in ("fp32", "bf16", "fp16-emulated")] == [
        "PASS", "PASS", "NONFINITE"]
    first = cells["fp16-emulated"]["first_nonfinite"]
    assert (first["module"], first["op"], first["step"]) == ("denoiser.blocks.1.ff.0", "aten::linear", 0)
    assert "module calls" in cells["fp16-emulated"]["observed"]


def test_fp16_emulation_rounds_a_package_instead_of_copying_fp32(packages):
    _, cells = check(packages, "clean", "fp32,fp16-emulated")
    emulated = cells["fp16-emulated"]["metrics"]
    assert cells["fp16-emulated"]["status"] == "PASS"
    assert emulated["rel_l2"] > 0 and emulated["min_psnr"] is not None  # not bit-identical


def test_a_nan_made_by_an_op_in_a_forward_body_names_the_op(packages):
    r, cells = check(packages, "nan-in-body", "fp32")
    first = cells["fp32"]["first_nonfinite"]
    assert cells["fp32"]["status"] == "NONFINITE"
    assert (first["module"], first["op"]) == ("denoiser.blocks.0.attn", "aten::log")


def test_probes_give_every_module_its_sqnr_against_fp32(packages):
    _, cells = check(packages, "clean", "bf16", "scripted", "--probes")
    probes = {p["module"]: p for p in cells["bf16"]["probes"]}
    assert "denoiser.blocks.0.attn" in probes or "denoiser.blocks.1.attn" in probes
    sqnr = [p["sqnr_db"] for p in probes.values() if isinstance(p["sqnr_db"], float)]
    assert sqnr and all(10 < s < 120 for s in sqnr)  # bf16: about 8 bits, so 30-60 dB


@pytest.mark.parametrize("name,exit_code,found", [
    ("clean", 0, None),
    ("f1-time-embed", 1, "denoiser.embed.time_mlp.0 (aten::linear): input fp32, weight bf16"),
    ("f4-input-fp32", 1, "denoiser.conv_in (aten::conv3d): input fp32, weight bf16"),
])
def test_audit_finds_f1_and_f4_by_module_path_from_one_traced_step(packages, name, exit_code, found):
    r = run("audit", "--model", packages / "scripted" / name, "--policy", "bf16")
    assert r.returncode == exit_code, r.stdout + r.stderr
    assert ("clean" if found is None else found) in r.stdout


def test_a_matrix_over_a_failing_package_records_the_error_cell_and_goes_on(packages, tmp_path):
    db = tmp_path / "fg.db"
    r = run("run", "--model", packages / "scripted" / "f1-time-embed", "--policy", "fp32,bf16",
            "--golden-dir", packages / "goldens", "--db", db, "--json", tmp_path / "run.json",
            cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr  # a finding, not a harness error (2)
    cells = {c["policy"]: c for c in json.loads((tmp_path / "run.json").read_text())["cells"]}
    assert cells["fp32"]["status"] == "PASS" and cells["bf16"]["status"] == "ERROR"
    assert cells["bf16"]["error_module"] == "denoiser.embed.time_mlp.0"


def test_a_package_that_fails_in_fp32_is_bad_input_naming_the_file(packages, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in ("model.toml", "decoder.pt"):
        (broken / f).write_bytes((packages / "scripted" / "clean" / f).read_bytes())
    # A denoiser whose output has the decoder's shape: the contract fails in fp32.
    (broken / "denoiser.pt").write_bytes((packages / "scripted" / "clean" / "decoder.pt").read_bytes())
    r = run("check", "--model", broken, "--policy", "bf16", "--golden-dir", packages / "goldens")
    assert r.returncode == 2
    assert r.stderr.startswith("framegate: error: ") and r.stderr.count("\n") == 1
    assert f"{broken}/denoiser.pt" in r.stderr


def test_advise_finds_islands_whose_policy_makes_the_cell_pass_in_a_matrix(packages, tmp_path):
    package = packages / "scripted" / "f3-ff-overflow"
    advice_file = tmp_path / "advice.json"
    r = run("advise", "--model", package, "--policy", "fp16-emulated", "--golden-dir",
            packages / "goldens", "--json", advice_file, "--db", tmp_path / "advise.db")
    assert r.returncode == 0, r.stdout + r.stderr
    advice = json.loads(advice_file.read_text())
    assert advice["status_before"] == "NONFINITE" and advice["status_after"] == "PASS"
    # The culprit Linear and the GELU op after it: the Linear's FP32 output reaches the GELU
    # unrounded, and the GELU's reaches the next Linear in FP16.
    assert advice["islands"] == ["denoiser.blocks.1.ff.0", "denoiser.blocks.1.ff.1:aten::gelu"]
    assert [run["status"] for run in advice["runs"]][-1] in ("PASS", "NONFINITE")
    assert 0 < advice["fp32_weight_fraction"] < 0.5
    assert advice["policy_toml"] in r.stdout
    # --db recorded the cell with its advice; the HTML report shows it.
    with sqlite3.connect(tmp_path / "advise.db") as db:
        assert db.execute("SELECT status_before, status_after, islands FROM advice").fetchall() == [
            ("NONFINITE", "PASS", '["denoiser.blocks.1.ff.0","denoiser.blocks.1.ff.1:aten::gelu"]')]
    report = run("report", "latest", "--db", tmp_path / "advise.db", "--html", tmp_path / "html",
                 threads=False)
    assert report.returncode in (0, 1), report.stderr
    pages = "".join(p.read_text() for p in (tmp_path / "html").rglob("*.html"))
    assert "denoiser.blocks.1.ff" in pages and "fp16-emulated-fp32-islands" in pages
    # The printed policy, pasted as it is into a matrix file, makes the cell pass.
    matrix = tmp_path / "mine.toml"
    matrix.write_text(f"""name = "mine"
[axes]
pipelines = ["{package}"]
devices = ["cpu"]
policies = ["fp16-emulated", "{advice['policy_name']}"]
seeds = [0]

{advice['policy_toml']}""")
    out = tmp_path / "run.json"
    r = run("run", matrix, "--golden-dir", packages / "goldens", "--db", tmp_path / "fg.db",
            "--json", out, cwd=tmp_path)
    cells = {c["policy"]: c["status"] for c in json.loads(out.read_text())["cells"]}
    assert cells == {"fp16-emulated": "NONFINITE", advice["policy_name"]: "PASS"}
    # check reads the same policy from the file.
    r = run("check", "--model", package, "--policy", advice["policy_name"], "--policy-file", matrix,
            "--golden-dir", packages / "goldens")
    assert r.returncode == 0, r.stdout + r.stderr


def test_advise_for_a_dtype_mismatch_keeps_the_op_that_made_the_float32_operand(packages, tmp_path):
    """F1 computes its time embedding in float32 (`.float()` in denoiser.embed): the error is
    raised in time_mlp.0, and names the cast as where its operand became float32. The cast
    as an op island hands its output on in bf16, to every op that takes it: 0% of the
    weights, where keeping time_mlp.0 in FP32 kept 3.2% (and one island per consumer for a
    float32 value that reaches several)."""
    out = tmp_path / "advice.json"
    r = run("advise", "--model", packages / "scripted" / "f1-time-embed", "--policy", "bf16",
            "--golden-dir", packages / "goldens", "--json", out)
    assert r.returncode == 0, r.stdout + r.stderr
    advice = json.loads(out.read_text())
    assert advice["status_before"] == "ERROR" and advice["status_after"] == "PASS", advice["runs"]
    assert advice["culprit"] == "denoiser.embed (aten::to)"
    assert advice["islands"] == ["denoiser.embed:aten::to"] and advice["fp32_weight_fraction"] == 0


def test_advise_says_when_fp32_islands_cannot_help(packages, tmp_path):
    r = run("advise", "--model", packages / "scripted" / "nan-in-body", "--policy", "fp16-emulated",
            "--golden-dir", packages / "goldens", "--max-runs", "8")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "whole model in FP32 too" in r.stdout
