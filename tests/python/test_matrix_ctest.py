"""framegate_add_matrix_tests (cmake/FramegateMatrixTests.cmake) registers a matrix's cells
as CTest tests: a real CMake project in a temporary folder, built and asked with
`ctest -N` / `--show-only=json-v1`. Also runners/ctest/make_resource_spec.py."""
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")

GPU_MATRIX = """
timeout = 45
[axes]
pipelines = ["tiny"]
devices = ["cpu", "cuda:0"]
policies = ["fp32", "bf16"]
[tolerance]
bf16 = "fp16"
[[xfail]]
policy = "bf16"
device = "cpu"
reason = "known"
"""


def cpu_has_fp16_compute():
    """Whether the LibTorch framegate runs on has FP16 convolution/matmul on the CPU (2.2
    on; harness/torch_version.h, kCpuHasFp16Compute)."""
    info = subprocess.run([FRAMEGATE, "info", "--json", "-"], capture_output=True, text=True, check=True)
    return tuple(int(part) for part in json.loads(info.stdout)["libtorch"].split(".")[:2]) >= (2, 2)


def configure_and_build(tmp_path, calls):
    project = tmp_path / "project"
    project.mkdir()
    (project / "gpu.toml").write_text(GPU_MATRIX)
    (project / "CMakeLists.txt").write_text(f"""
cmake_minimum_required(VERSION 3.22)
project(matrix_ctest_probe NONE)
enable_testing()
list(APPEND CMAKE_MODULE_PATH "{SOURCE}/cmake")
include(FramegateMatrixTests)
add_executable(framegate IMPORTED)
set_target_properties(framegate PROPERTIES IMPORTED_LOCATION "{FRAMEGATE}")
{calls}
""")
    build = tmp_path / "build"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(["cmake", "-S", str(project), "-B", str(build), *generator],
                   check=True, capture_output=True, text=True)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True, text=True)
    return build


def ctest(build, *args):
    return subprocess.run(["ctest", *args], cwd=build, check=True, capture_output=True, text=True).stdout


def selected(build, label):
    """How many tests `ctest -N -L label` selects."""
    return int(re.search(r"Total Tests: (\d+)", ctest(build, "-N", "-L", label)).group(1))


def registered(build):
    tests = json.loads(ctest(build, "--show-only=json-v1"))["tests"]
    out = {}
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        out[t["name"]] = (t.get("command", []), props)
    return out


def test_smoke_cells_register_with_labels_and_ctest_L_selects_them(tmp_path):
    build = configure_and_build(
        tmp_path, f'framegate_add_matrix_tests(MATRIX "{SOURCE}/matrix/smoke.toml" LABEL_PREFIX matrix)')
    names = re.findall(r"Test +#\d+: (.*)", ctest(build, "-N", "-L", "^bf16$"))
    assert names == ["matrix/reference:tiny/cpu/bf16/seed=0",
                     "matrix/reference:tiny/cpu/bf16/seed=0/fault=time-embed-fp32",
                     "matrix/reference:tiny/cpu/bf16/seed=0/fault=input-fp32"]
    # -L is a regular expression: plain "bf16" also selects the fp8e4m3-bf16 cells.
    assert selected(build, "bf16") == 5
    tests = registered(build)
    assert len(tests) == 10
    command, props = tests["matrix/reference:tiny/cpu/fp32/seed=0"]
    assert command == [FRAMEGATE, "check", "--size", "tiny", "--policy", "fp32", "--device", "cpu",
                       "--seed", "0"]
    assert sorted(props["LABELS"]) == sorted(["matrix", "cpu", "fp32", "tiny"])
    assert props["TIMEOUT"] == 120 and "RESOURCE_GROUPS" not in props
    # xfail: the reason goes to `check --xfail` (a caught failure is XFAIL, exit 0).
    command, _ = tests["matrix/reference:tiny/cpu/fp16-emulated/seed=0/fault=attn-overflow"]
    assert command == [FRAMEGATE, "check", "--size", "tiny", "--policy", "fp16-emulated",
                       "--device", "cpu", "--seed", "0", "--fault", "attn-overflow", "--xfail",
                       "F2: attention logits beyond FP16 must end NONFINITE or BROKEN_FRAMES"]
    # The fp16 cell runs where LibTorch has FP16 kernels on the CPU; elsewhere it is
    # registered, but disabled.
    fp16_disabled = tests["matrix/reference:tiny/cpu/fp16/seed=0"][1].get("DISABLED")
    assert fp16_disabled is (None if cpu_has_fp16_compute() else True)
    assert selected(build, "fp16-emulated") == 3


def test_gpu_cells_get_resource_groups_and_extra_args(tmp_path):
    build = configure_and_build(
        tmp_path, 'framegate_add_matrix_tests(MATRIX gpu.toml LABEL_PREFIX fleet '
                  'FILTER "policy=bf16" EXTRA_ARGS --golden-dir /goldens '
                  'PROPERTIES FIXTURES_REQUIRED goldens)')
    tests = registered(build)
    assert sorted(tests) == ["fleet/reference:tiny/cpu/bf16/seed=0", "fleet/reference:tiny/cuda:0/bf16/seed=0"]
    command, props = tests["fleet/reference:tiny/cuda:0/bf16/seed=0"]
    assert command[-4:] == ["--tolerance", "fp16", "--golden-dir", "/goldens"]
    assert tests["fleet/reference:tiny/cpu/bf16/seed=0"][0][-6:] == [
        "--tolerance", "fp16", "--xfail", "known", "--golden-dir", "/goldens"]
    assert props["TIMEOUT"] == 45
    assert props["FIXTURES_REQUIRED"] == ["goldens"]
    groups = props["RESOURCE_GROUPS"]
    assert [{r[".type"]: r["slots"] for r in g["requirements"]} for g in groups] == \
        [{"gpus": 1, "cuda0": 1}]
    assert sorted(props["LABELS"]) == sorted(["fleet", "cuda:0", "bf16", "tiny"])
    assert selected(build, "cuda") == 1


def test_a_broken_matrix_fails_the_build_naming_the_error(tmp_path):
    (tmp_path / "broken.toml").write_text("[axes]\npipelines = []\n")
    with pytest.raises(subprocess.CalledProcessError) as failure:
        configure_and_build(tmp_path, f'framegate_add_matrix_tests(MATRIX "{tmp_path}/broken.toml" '
                                      'LABEL_PREFIX broken)')
    output = " ".join((failure.value.stdout + failure.value.stderr).split())  # CMake wraps lines
    assert "broken.toml:2:13: axis 'pipelines' is empty" in output


def test_resource_spec_lists_no_gpus_without_nvidia_smi(tmp_path):
    script = SOURCE / "runners" / "ctest" / "make_resource_spec.py"
    out = tmp_path / "spec.json"
    subprocess.run(["/usr/bin/python3", str(script), "--out", str(out), "--nvidia-smi",
                    str(tmp_path / "no-nvidia-smi")], check=True)
    assert json.loads(out.read_text()) == {"version": {"major": 1, "minor": 0}, "local": [{"gpus": []}]}


def test_resource_spec_has_a_pool_and_a_slot_per_gpu(tmp_path):
    # A real executable standing in for nvidia-smi's CSV output on a two-GPU host.
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nprintf '0\\n1\\n'\n")
    fake.chmod(0o755)
    script = SOURCE / "runners" / "ctest" / "make_resource_spec.py"
    spec = json.loads(subprocess.run(["/usr/bin/python3", str(script), "--nvidia-smi", str(fake)],
                                     check=True, capture_output=True, text=True).stdout)
    assert spec["local"][0] == {"gpus": [{"id": "0", "slots": 1}, {"id": "1", "slots": 1}],
                                "cuda0": [{"id": "0", "slots": 1}], "cuda1": [{"id": "1", "slots": 1}]}
    # CTest accepts it: a test needing gpus:1,cuda1:1 runs under it.
    project = tmp_path / "p"
    project.mkdir()
    (project / "CMakeLists.txt").write_text("""
cmake_minimum_required(VERSION 3.22)
project(rs NONE)
enable_testing()
add_test(NAME on_gpu1 COMMAND sh -c "test \\"$CTEST_RESOURCE_GROUP_0_CUDA1\\" = id:1,slots:1")
set_tests_properties(on_gpu1 PROPERTIES RESOURCE_GROUPS "gpus:1,cuda1:1")
""")
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    subprocess.run(["cmake", "-S", str(project), "-B", str(tmp_path / "b")], check=True, capture_output=True)
    result = subprocess.run(["ctest", "--resource-spec-file", str(tmp_path / "spec.json")],
                            cwd=tmp_path / "b", capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
