"""ATen's CPU kernel paths as devices: `cpu:default`, `cpu:avx2` (ATEN_CPU_CAPABILITY) listed by
`framegate devices`, run each in its own process by `framegate run`, and judged against a
golden made on plain `cpu`."""
import json
import os
import subprocess

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")

FAST = ["--size", "tiny", "--steps", "2", "--threads", "1"]


def framegate(*args, cwd=None):
    r = subprocess.run([FRAMEGATE, *args], capture_output=True, text=True, cwd=cwd)
    return r


@pytest.fixture(scope="module")
def kernel_paths():
    info = json.loads(framegate("devices", "--json", "-").stdout)
    return [d["device"] for d in info["devices"] if d["device"].startswith("cpu:")]


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    d = tmp_path_factory.mktemp("golden")
    r = framegate("golden", "make", *FAST, "--golden-dir", str(d))
    assert r.returncode == 0, r.stdout + r.stderr
    return d


def test_devices_lists_the_kernel_paths_after_the_cpu(kernel_paths):
    info = json.loads(framegate("devices", "--json", "-").stdout)
    names = [d["device"] for d in info["devices"]]
    assert names[0] == "cpu" and "cpu:default" in kernel_paths
    assert names[1:1 + len(kernel_paths)] == kernel_paths
    assert set(kernel_paths) <= {"cpu:avx512", "cpu:avx2", "cpu:default"}
    assert "cpu:default  " in framegate("devices").stdout


def test_run_judges_each_kernel_path_in_its_own_process(tmp_path, kernel_paths, golden):
    devices = [d for d in ("cpu:default", "cpu:avx2") if d in kernel_paths]
    (tmp_path / "m.toml").write_text(
        '[axes]\npipelines = ["tiny"]\ndevices = [%s]\npolicies = ["fp32"]\nsteps = [2]\n'
        % ", ".join('"%s"' % d for d in devices))
    out = tmp_path / "run.json"
    r = framegate("run", "m.toml", "--threads", "1", "--golden-dir", str(golden),
                  "--json", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads(out.read_text())
    assert sorted(c["device"] for c in run["cells"]) == sorted(devices)
    assert all(c["status"] == "PASS" for c in run["cells"]), run["cells"]
    verdicts = {v["device"]: v for v in run["device_verdicts"]}
    assert sorted(verdicts) == sorted(devices)
    assert all(v["qualified"] for v in verdicts.values())
    assert (tmp_path / "framegate.db").exists()


def test_in_process_commands_reexecute_with_the_kernel_path(tmp_path, kernel_paths):
    frames = {}
    for device in [d for d in ("cpu:default", "cpu:avx2") if d in kernel_paths]:
        out = tmp_path / device.replace(":", "-")
        r = framegate("generate", *FAST, "--device", device, "--out", str(out))
        assert r.returncode == 0, r.stdout + r.stderr
        frames[device] = (out / "frames.npy").read_bytes()
    if len(frames) == 2:
        same = frames["cpu:default"] == frames["cpu:avx2"]
        print("cpu:default vs cpu:avx2 frames:", "identical" if same else "differ in the last bits")
        assert not same  # observed on the development host: the kernel paths differ


def test_check_with_several_kernel_paths_is_a_harness_error():
    r = framegate("check", *FAST, "--device", "cpu:*")
    assert r.returncode == 2
    assert "use `framegate run` or one --device per check" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
