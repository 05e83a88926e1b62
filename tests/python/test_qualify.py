"""`framegate qualify` on this CPU's kernel paths (cpu:avx512, cpu:avx2, cpu:default), real
processes, real goldens and a real SQLite file: the clean fleet PASSes, a persistent bit
flip on cpu:avx512 makes it FAULTY (the others PASS) with the step and module named, a
transient one DEGRADED; the verdicts are stored and `history --qualification` reads them
back; a version 1 golden and a bad --inject-sdc are one line and exit 2; the same verdicts hold
for two zoo packages (a scripted MM-DiT, a traced UNet3D) with a flip in their ops; and on
two paths alone (cpu:avx2, cpu:default), the calibration's FP32 step budget judges the steps."""
import json
import os
import shutil
import subprocess

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")
DEVICES = {"cpu:avx512", "cpu:avx2", "cpu:default"}
# The fleet check: tiny, fp32 and bf16, two seeds, on every kernel path.
MATRIX = """name = "q"
[axes]
pipelines = ["tiny"]
devices = ["cpu:*"]
policies = [{policies}]
seeds = [{seeds}]
"""


def framegate(*args):
    return subprocess.run([FRAMEGATE, *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    info = json.loads(framegate("devices", "--json", "-").stdout)
    paths = {d["device"] for d in info["devices"]}
    if not DEVICES <= paths:
        pytest.skip("this CPU lacks a kernel path: " + ", ".join(sorted(DEVICES - paths)))
    d = tmp_path_factory.mktemp("q")
    for seed in (0, 1):
        r = framegate("golden", "make", "--size", "tiny", "--seed", seed, "--golden-dir", d / "goldens")
        assert r.returncode == 0, r.stderr
    return d


def qualify(d, policies, seeds, *extra):
    matrix = d / f"m-{len(policies)}-{len(seeds)}.toml"
    matrix.write_text(MATRIX.format(policies=", ".join(f'"{p}"' for p in policies),
                                    seeds=", ".join(map(str, seeds))))
    r = framegate("qualify", matrix, "--golden-dir", d / "goldens", "--db", d / "q.db", "--json", d / "q.json",
                  "--junit", d / "q.xml", *extra)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads((d / "q.json").read_text())
    return r, {x["device"]: x for x in doc["devices"]}


def test_a_clean_fleet_passes_and_is_stored(fleet):
    r, devices = qualify(fleet, ["fp32", "bf16"], [0, 1])
    assert r.returncode == 0, r.stdout
    assert set(devices) == DEVICES
    for d in devices.values():
        assert d["verdict"] == "PASS", d
        assert d["cells"] == 4 and d["repeats"] == 3
    xml = (fleet / "q.xml").read_text()
    assert xml.count("<testcase") == 3 and "<failure" not in xml
    h = framegate("history", "--qualification", "--device", "cpu:avx512", "--db", fleet / "q.db", "--json", "-")
    assert h.returncode == 0, h.stderr
    assert "PASS" in h.stdout


def test_a_persistent_flip_makes_the_device_faulty_and_names_the_step(fleet):
    r, devices = qualify(fleet, ["fp32"], [0], "--inject-sdc", "cpu:avx512:2:persistent:exponent")
    assert r.returncode == 1
    bad = devices["cpu:avx512"]
    assert bad["verdict"] == "FAULTY", bad
    reason = bad["reasons"][0]
    assert reason["kind"] == "persistent_mismatch"
    assert reason["step"] is not None and reason["module"], reason
    assert devices["cpu:avx2"]["verdict"] == "PASS" and devices["cpu:default"]["verdict"] == "PASS"
    assert "FAULTY" in r.stdout


def test_a_transient_flip_makes_the_device_degraded(fleet):
    r, devices = qualify(fleet, ["fp32"], [0], "--inject-sdc", "cpu:avx512:2:transient:exponent")
    assert r.returncode == 1
    bad = devices["cpu:avx512"]
    assert bad["verdict"] == "DEGRADED", bad
    assert bad["reasons"][0]["kind"] == "transient_mismatch"
    assert bad["reasons"][0]["step"] is not None
    assert devices["cpu:avx2"]["verdict"] == "PASS" and devices["cpu:default"]["verdict"] == "PASS"


def test_check_replay_prints_each_steps_error(fleet):
    r = framegate("check", "--size", "tiny", "--policy", "fp32", "--golden-dir", fleet / "goldens", "--replay", 2,
                  "--json", "-")
    assert r.returncode == 0, r.stderr
    cell = json.loads(r.stdout)["cells"][0]
    assert len(cell["replays"]) == 2
    assert len(cell["replays"][0]["step_rel_l2"]) == 8
    assert cell["replays"][0]["digest"] == cell["replays"][1]["digest"]
    assert "replay 1: step rel_l2" in r.stderr


@pytest.mark.parametrize("args, message", [
    (["--inject-sdc", "cpu:avx512:often"], "--inject-sdc 'cpu:avx512:often'"),
    (["--inject-sdc", "cpu:1"], "needs --replay"),
])
def test_bad_injection_is_one_line_and_exit_2(fleet, args, message):
    r = framegate("check", "--size", "tiny", "--policy", "fp32", "--golden-dir", fleet / "goldens", *args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr


def test_a_version_1_golden_cannot_be_replayed(fleet, tmp_path):
    source = os.environ.get("FRAMEGATE_SOURCE_DIR", "")
    old = os.path.join(source, "tests", "data", "golden-v1")
    r = framegate("check", "--size", "tiny", "--policy", "fp32", "--golden-dir", old, "--replay", 1)
    assert r.returncode == 2
    assert "format version 1" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def package_fleet(fleet, tmp_path_factory):
    """Two model packages framegate has no bound for (a scripted MM-DiT and a traced UNet3D
    of the zoo), with their goldens."""
    source = os.environ.get("FRAMEGATE_SOURCE_DIR", "")
    d = tmp_path_factory.mktemp("qpkg")
    make = os.path.join(source, "pipelines", "examples", "make_zoo_packages.py")
    for form, name in (("--scripted", "mmdit"), ("--traced", "unet3d")):
        r = subprocess.run(["/usr/bin/python3", make, "--only", name, form, d / form.strip("-")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        package = d / form.strip("-") / name
        r = framegate("golden", "make", "--model", package, "--golden-dir", d / "goldens")
        assert r.returncode == 0, r.stderr
    (d / "m.toml").write_text('name = "qpkg"\n[axes]\npipelines = ["scripted/mmdit", "traced/unet3d"]\n'
                              'devices = ["cpu:*"]\npolicies = ["fp32"]\nseeds = [0]\n')
    return d


def qualify_packages(d, *extra):
    r = framegate("qualify", d / "m.toml", "--golden-dir", d / "goldens", "--db", d / "q.db", "--json", "-", *extra)
    assert r.returncode in (0, 1), r.stderr
    return r, {x["device"]: x for x in json.loads(r.stdout)["devices"]}


def test_a_packages_fleet_passes_clean_and_is_faulty_with_a_persistent_flip(package_fleet):
    r, devices = qualify_packages(package_fleet)
    assert r.returncode == 0, devices
    assert {d["verdict"] for d in devices.values()} == {"PASS"} and set(devices) == DEVICES
    r, devices = qualify_packages(package_fleet, "--inject-sdc", "cpu:avx2:1:persistent:exponent")
    assert r.returncode == 1
    bad = devices["cpu:avx2"]
    assert bad["verdict"] == "FAULTY", bad
    assert {reason["kind"] for reason in bad["reasons"]} == {"persistent_mismatch"}
    assert all(reason["step"] is not None and reason["module"] for reason in bad["reasons"]), bad
    assert devices["cpu:avx512"]["verdict"] == "PASS" and devices["cpu:default"]["verdict"] == "PASS"


# Two kernel paths (any AVX2 CPU has cpu:avx2 and cpu:default): no majority, so the steps
# of an FP32 cell are judged by the model's calibration, its FP32 step noise floor.
PAIR = """name = "qpair"
[axes]
pipelines = ["tiny"]
devices = ["cpu:avx2", "cpu:default"]
policies = ["fp32", "bf16"]
seeds = [0]
"""


@pytest.fixture(scope="module")
def calibrated_pair(tmp_path_factory):
    info = json.loads(framegate("devices", "--json", "-").stdout)
    if "cpu:avx2" not in {d["device"] for d in info["devices"]}:
        pytest.skip("this CPU has no cpu:avx2 kernel path")
    d = tmp_path_factory.mktemp("qpair")
    r = framegate("calibrate", "--size", "tiny", "--policy", "fp32", "--seeds", "0", "--golden-dir",
                  d / "goldens")
    assert r.returncode == 0, r.stderr
    (d / "m.toml").write_text(PAIR)
    return d


def qualify_pair(d, *extra):
    r = framegate("qualify", d / "m.toml", "--golden-dir", d / "goldens", "--db", d / "q.db", "--json", "-",
                  "--repeats", 2, *extra)
    assert r.returncode in (0, 1), r.stderr
    return r, {x["device"]: x for x in json.loads(r.stdout)["devices"]}


def test_the_calibration_measures_the_steps_fp32_noise(calibrated_pair):
    (calibration,) = (calibrated_pair / "goldens").glob("calibration-*.toml")
    text = calibration.read_text()
    assert "step_rel_l2 = " in text and "cpu:default threads=" in text
    r = framegate("check", "--size", "tiny", "--policy", "fp32", "--device", "cpu:default", "--golden-dir",
                  calibrated_pair / "goldens", "--replay", 1)
    assert r.returncode == 0, r.stderr
    assert "step budget" in r.stdout and "(calibration): 0 over" in r.stdout, r.stdout


def test_a_calibrated_pair_passes_clean_with_only_its_bf16_cells_not_compared(calibrated_pair):
    r, devices = qualify_pair(calibrated_pair)
    assert r.returncode == 0, r.stdout
    for d in devices.values():
        assert d["verdict"] == "PASS", d
        notes = [x for x in d["reasons"] if x["kind"] == "not_compared"]
        assert len(notes) == 1 and "bf16" in notes[0]["cell"], d["reasons"]


def test_a_persistent_flip_on_one_of_two_devices_is_faulty_by_the_step_budget(calibrated_pair):
    r, devices = qualify_pair(calibrated_pair, "--inject-sdc", "cpu:default:2:persistent:exponent")
    assert r.returncode == 1
    bad = devices["cpu:default"]
    assert bad["verdict"] == "FAULTY", bad
    reason = bad["reasons"][0]
    assert reason["kind"] == "step_conformance" and "fp32" in reason["cell"], reason
    assert reason["step"] is not None, reason
    assert devices["cpu:avx2"]["verdict"] == "PASS", devices["cpu:avx2"]


def test_calibrating_on_a_version_1_golden_leaves_the_steps_unmeasured(tmp_path):
    source = os.environ.get("FRAMEGATE_SOURCE_DIR", "")
    goldens = tmp_path / "goldens"
    shutil.copytree(os.path.join(source, "tests", "data", "golden-v1"), goldens)
    r = framegate("calibrate", "--size", "tiny", "--policy", "fp32", "--seeds", "0", "--golden-dir", goldens)
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert out.count("steps not measured") == 1 and "format version 1" in out, out
    (calibration,) = goldens.glob("calibration-*.toml")
    assert "step_rel_l2" not in calibration.read_text()


def test_a_missing_golden_is_one_line_naming_it(tmp_path):
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX.format(policies='"fp32"', seeds="0").replace('"cpu:*"', '"cpu"'))
    r = framegate("qualify", matrix, "--golden-dir", tmp_path / "none", "--db", tmp_path / "q.db")
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].count("framegate: error: ") == 1, r.stderr
    assert "no golden" in lines[0] and "framegate golden make" in lines[0], r.stderr
