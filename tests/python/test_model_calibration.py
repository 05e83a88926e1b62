"""`framegate calibrate` on a real example package (issue 22): the calibration is written
beside the goldens, `check` and `run` name it as the bound that judged each cell (terminal,
JSON, store), a model that changed since falls back to the profile saying why, a corrupt
calibration file is a one-line error, and model.toml's own bounds come first."""
import json
import os
import pathlib
import shlex
import shutil
import sqlite3
import subprocess
import sys

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
MAKE_PACKAGES = SOURCE / "pipelines" / "examples" / "make_example_packages.py"


def run(*args, cwd=None):
    return subprocess.run([FRAMEGATE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def one_line_error(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("framegate: error: ") and r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """The clean package calibrated for fp32 and bf16 on seeds 0-1 (goldens made by it)."""
    root = tmp_path_factory.mktemp("calibrated")
    subprocess.run([sys.executable, str(MAKE_PACKAGES), str(root / "built"), "--only", "clean"], check=True,
                   capture_output=True, timeout=300)
    out = root / "calibration.json"
    r = run("calibrate", "--model", root / "built" / "clean", "--policy", "fp32,bf16", "--seeds", "0-1",
            "--golden-dir", root / "goldens", "--threads", "1", "--json", out)
    assert r.returncode == 0, r.stdout + r.stderr
    return root, json.loads(out.read_text())


def package_copy(calibrated, tmp_path):
    root, _ = calibrated
    pkg = tmp_path / "clean"
    shutil.copytree(root / "built" / "clean", pkg)
    return pkg, root / "goldens"


def check(pkg, goldens, tmp_path, *extra):
    out = tmp_path / "cells.json"
    r = run("check", "--model", pkg, "--policy", "fp32,bf16", "--golden-dir", goldens, "--threads", "1",
            "--json", out, *extra)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return r, {c["policy"]: c for c in json.loads(out.read_text())["cells"]}


def test_calibrate_writes_the_measurements_and_their_provenance_beside_the_goldens(calibrated):
    root, cal = calibrated
    path = pathlib.Path(cal["path"])
    assert path.parent == root / "goldens" and path.name.startswith("calibration-model-clean-")
    assert len(cal["goldens_made"]) == 2
    assert set(cal["model_sha256"]) == {"denoiser.pt", "decoder.pt", "model.toml"}
    assert len(cal["golden_sha256"]) == 2
    runs = cal["noise_floor"]["runs"]
    assert "cpu threads=1" in runs and any(r.startswith("cpu:") for r in runs), runs
    bf16 = cal["policies"]["bf16"]
    assert bf16["not_calibrated"] == "" and bf16["seeds"] == [0, 1]
    # The bound rule: 2x the RMS error, so 6.02 dB under the worst PSNR (no noise here).
    assert bf16["bounds"]["min_psnr"] == pytest.approx(bf16["worst"]["min_psnr"] - 6.0206, abs=0.01)
    assert cal["seconds"] > 0
    text = path.read_text()
    assert "framegate_version = " in text and "created_at = " in text


def test_check_names_the_calibration_as_the_judge(calibrated, tmp_path):
    root, cal = calibrated
    r, cells = check(root / "built" / "clean", root / "goldens", tmp_path)
    assert r.returncode == 0, r.stdout
    for policy in ("fp32", "bf16"):
        assert cells[policy]["status"] == "PASS"
        assert cells[policy]["judged_by"].startswith("calibration " + cal["path"] + " (model sha256 ")
    assert "judged by calibration " + cal["path"] in r.stdout
    # --ignore-calibration: the profile judges.
    r, cells = check(root / "built" / "clean", root / "goldens", tmp_path, "--ignore-calibration")
    assert cells["bf16"]["judged_by"] == "profile bf16"


def test_making_a_golden_again_keeps_its_file_and_so_the_calibration(calibrated, tmp_path):
    root, _ = calibrated
    goldens = tmp_path / "goldens"
    shutil.copytree(root / "goldens", goldens)
    r = run("golden", "make", "--model", root / "built" / "clean", "--seed", 0, "--golden-dir", goldens,
            "--threads", "1")
    assert r.returncode == 0 and r.stdout.startswith("kept "), r.stdout + r.stderr
    _, cells = check(root / "built" / "clean", goldens, tmp_path)
    assert cells["bf16"]["judged_by"].startswith("calibration " + str(goldens)), cells["bf16"]["judged_by"]


def test_a_changed_model_falls_back_to_the_profile_and_says_the_calibration_is_stale(calibrated, tmp_path):
    pkg, goldens = package_copy(calibrated, tmp_path)
    with open(pkg / "model.toml", "a") as f:
        f.write("\n# edited after calibration\n")
    r, cells = check(pkg, goldens, tmp_path)
    assert cells["bf16"]["status"] == "PASS"
    judged = cells["bf16"]["judged_by"]
    assert judged.startswith("profile bf16 (calibration ") and "is stale: model.toml changed" in judged, judged
    # The note ends with the command that measures the same policies and seeds again.
    assert f"; run framegate calibrate --model {pkg} " in judged, judged
    assert judged.endswith(f" --policy fp32,bf16 --seeds 0,1 --golden-dir {goldens} again)"), judged


def test_a_policy_the_calibration_lacks_is_judged_by_its_profile_and_says_how_to_add_it(calibrated, tmp_path):
    """The note gives the calibrate command with the policy (and its --policy-file) added;
    that command runs, and the next check is judged by the calibration."""
    root, _ = calibrated
    goldens = tmp_path / "goldens"
    shutil.copytree(root / "goldens", goldens)
    policies = tmp_path / "policies.toml"
    policies.write_text('[policy.my-bf16]\nbased_on = "bf16"\n')

    def cells_of(*policy):
        out = tmp_path / "cells.json"
        r = run("check", "--model", root / "built" / "clean", "--policy", ",".join(policy), "--policy-file",
                policies, "--golden-dir", goldens, "--threads", "1", "--json", out)
        assert r.returncode in (0, 1), r.stdout + r.stderr
        return {c["policy"]: c["judged_by"] for c in json.loads(out.read_text())["cells"]}

    judged = cells_of("fp16-emulated", "my-bf16")
    calibration = next(goldens.glob("calibration-*.toml"))
    command = f"framegate calibrate --model {root / 'built' / 'clean'} "
    assert judged["fp16-emulated"].startswith(
        f"profile fp16-emulated (calibration {calibration}: policy 'fp16-emulated' is not calibrated; run {command}"
    ), judged
    assert judged["fp16-emulated"].endswith(f" --policy fp32,bf16,fp16-emulated --seeds 0,1 --golden-dir {goldens})")
    note = judged["my-bf16"]
    assert f" --policy fp32,bf16,my-bf16 --policy-file {policies} --seeds 0,1 " in note, note
    words = shlex.split(note[note.index("; run framegate calibrate ") + len("; run framegate "):-1])
    r = run(*words, "--threads", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert cells_of("my-bf16")["my-bf16"].startswith(f"calibration {calibration} (model sha256 ")


def test_a_replaced_golden_says_why_and_the_calibration_is_stale(calibrated, tmp_path):
    root, _ = calibrated
    goldens = tmp_path / "goldens"
    shutil.copytree(root / "goldens", goldens)
    golden = next(goldens.glob("model-clean-seed0-*.safetensors"))
    with open(golden, "r+b") as f:  # one byte of the last tensor's values
        f.seek(-3, os.SEEK_END)
        f.write(b"\x7f")
    r = run("golden", "make", "--model", root / "built" / "clean", "--seed", 0, "--golden-dir", goldens,
            "--threads", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"replaced {golden}: it could not be read: sha256 "), r.stdout
    assert "differs from the manifest's" in r.stdout, r.stdout
    assert r.stdout.endswith(" (a calibration made with the old golden is stale)\n"), r.stdout
    _, cells = check(root / "built" / "clean", goldens, tmp_path)
    judged = cells["bf16"]["judged_by"]
    assert f"is stale: the golden {golden.name} changed; run framegate calibrate " in judged, judged


def test_a_corrupt_calibration_file_is_a_one_line_error_naming_it(calibrated, tmp_path):
    root, cal = calibrated
    goldens = tmp_path / "goldens"
    shutil.copytree(root / "goldens", goldens)
    bad = goldens / pathlib.Path(cal["path"]).name
    bad.write_text("format_version = 1\nmultiplier = [\n")
    r = run("check", "--model", root / "built" / "clean", "--policy", "bf16", "--golden-dir", goldens,
            "--threads", "1")
    one_line_error(r, str(bad))


def test_model_toml_bounds_come_before_the_calibration(calibrated, tmp_path):
    pkg, goldens = package_copy(calibrated, tmp_path)
    with open(pkg / "model.toml", "a") as f:
        f.write("\n[tolerance.bf16]\nmin_psnr = 500.0\n")
    r, cells = check(pkg, goldens, tmp_path)
    assert r.returncode == 1
    assert cells["bf16"]["status"] == "FAIL" and "min_psnr" in cells["bf16"]["reason"]
    assert cells["bf16"]["judged_by"] == "model.toml [tolerance.bf16]"


def test_run_stores_which_bound_judged_each_cell(calibrated, tmp_path):
    root, cal = calibrated
    shutil.copytree(root / "built" / "clean", tmp_path / "clean")
    matrix = tmp_path / "m.toml"
    matrix.write_text('[axes]\npipelines = ["clean"]\ndevices = ["cpu"]\npolicies = ["fp32", "bf16"]\n')
    r = run("run", matrix, "--golden-dir", root / "goldens", "--threads", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    with sqlite3.connect(tmp_path / "framegate.db") as db:
        judged = [row[0] for row in db.execute("SELECT judged_by FROM cells")]
    assert len(judged) == 2 and all(j.startswith("calibration " + cal["path"]) for j in judged), judged
