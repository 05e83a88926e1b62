"""`framegate list` and `framegate devices` driven as real subprocesses."""
import json
import os
import pathlib
import re
import subprocess

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")


def run(*args, check=True, cwd=None):
    return subprocess.run([FRAMEGATE, *args], capture_output=True, text=True, check=check, cwd=cwd)


def cells(*args):
    return json.loads(run("list", *args, "--json", "-").stdout)["cells"]


def cpu_has_fp16_compute():
    """Whether the LibTorch framegate runs on has FP16 convolution/matmul on the CPU (2.2
    on; harness/torch_version.h, kCpuHasFp16Compute): where it has, fp16 cells run."""
    version = json.loads(run("info", "--json", "-").stdout)["libtorch"]
    return tuple(int(part) for part in version.split(".")[:2]) >= (2, 2)


def proc_cpu_flags():
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_list_defaults_to_the_local_matrix_from_any_directory(tmp_path):
    listed = run("list", cwd=tmp_path).stdout.splitlines()
    assert listed[0].startswith("matrix/local.toml (local): ")
    rows = [line for line in listed[2:] if line.strip()]
    policies = [row.split()[3] for row in rows if row.split()[2] == "cpu"]
    assert policies == ["fp32", "bf16", "fp16", "fp16-emulated", "fp8e4m3-bf16"]
    fp16 = next(row for row in rows if row.split()[3] == "fp16")
    unsupported = sum("UNSUPPORTED" in row for row in rows if row.split()[2] == "cpu")
    if cpu_has_fp16_compute():
        assert unsupported == 0, rows
    else:
        assert "UNSUPPORTED: policy fp16 computes in fp16: LibTorch" in fp16
        assert unsupported == 1


def test_every_shipped_matrix_lists_by_name_and_by_path():
    for name in ("local", "smoke", "nightly", "qualification"):
        by_name = json.loads(run("list", name, "--json", "-").stdout)
        by_path = json.loads(run("list", str(SOURCE / "matrix" / f"{name}.toml"), "--json", "-").stdout)
        assert by_name["sha256"] == by_path["sha256"], f"{name}: the compiled-in copy is stale"
        assert [c["cell_id"] for c in by_name["cells"]] == [c["cell_id"] for c in by_path["cells"]]
        assert all(re.fullmatch(r"[0-9a-f]{16}", c["cell_id"]) for c in by_name["cells"])
        assert len({c["cell_id"] for c in by_name["cells"]}) == len(by_name["cells"])


def test_smoke_marks_fault_cells_xfail_and_only_fp16_unsupported_here():
    smoke = cells("smoke")
    assert len(smoke) == 10
    assert sorted(c["fault"] for c in smoke if c["xfail"]) == sorted(
        ["time-embed-fp32", "attn-overflow", "activation-overflow", "input-fp32", "fp8-no-upcast"])
    expected = [] if cpu_has_fp16_compute() else ["fp16"]
    assert [c["policy"] for c in smoke if c["unsupported"]] == expected


def test_qualification_is_unsupported_without_a_gpu():
    devices = json.loads(run("devices", "--json", "-").stdout)["devices"]
    if any(d["device"].startswith("cuda") for d in devices):
        pytest.skip("this host has a GPU")
    qualification = cells("qualification")
    assert len(qualification) == 16
    assert all(c["unsupported"] == "device cuda:0 not found on this host (found: cpu)"
               for c in qualification)
    assert all(c["size"] == "large" and c["requires"][0] == "cuda" for c in qualification)


def test_filter_keeps_matching_cells():
    kept = cells("nightly", "--filter", "policy=fp16-emulated,seed=1")
    assert kept and all(c["policy"] == "fp16-emulated" and c["seed"] == 1 for c in kept)
    faults = cells("nightly", "--filter", "fault~overflow,device=cpu")
    assert sorted(c["fault"] for c in faults) == ["activation-overflow", "attn-overflow"]
    assert cells("smoke", "--filter", "xfail~F5")[0]["fault"] == "fp8-no-upcast"


def test_shards_partition_the_matrix():
    whole = [c["cell_id"] for c in cells("nightly")]
    for n in (1, 3, 7):
        shards = [[c["cell_id"] for c in cells("nightly", "--shard", f"{i}/{n}")] for i in range(1, n + 1)]
        merged = [cid for shard in shards for cid in shard]
        assert sorted(merged) == sorted(whole), f"n={n}"
    text = run("list", "nightly", "--shard", "2/3").stdout.splitlines()[0]
    assert re.search(r": \d+ cells in shard 2/3 of \d+, ", text), text


def one_line_error(result):
    assert result.returncode == 2, result
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr.strip()


def test_malformed_matrix_gives_file_line_column_and_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[axes]\npipelines = ["tiny"]\ndevices = ["cpu"]\npolices = ["fp32"]\n')
    assert one_line_error(run("list", str(bad), check=False)).startswith(
        f"framegate: error: {bad}:4:1: unknown key 'polices' in [axes] (known: pipelines,")
    bad.write_text('[axes]\npipelines = ["tiny"]\ndevices = ["cpu"]\npolicies = ["fp32", "fp61"]\n')
    assert one_line_error(run("list", str(bad), check=False)).startswith(
        f"framegate: error: {bad}:4:21: unknown policy 'fp61'")
    bad.write_text('[axes]\npipelines = ["tiny"]\ndevices = ["cpu"]\npolicies = []\n')
    assert one_line_error(run("list", str(bad), check=False)) == \
        f"framegate: error: {bad}:4:12: axis 'policies' is empty"
    assert "no such matrix file" in one_line_error(run("list", "nope.toml", check=False))


def test_bad_filter_and_shard_exit_2():
    assert "unknown key 'polcy'" in one_line_error(run("list", "smoke", "--filter", "polcy=fp16", check=False))
    assert "i must be from 1 to n" in one_line_error(run("list", "smoke", "--shard", "0/3", check=False))


def test_devices_reports_the_cpu_from_proc():
    text = run("devices").stdout
    assert text.startswith("cpu  ")
    info = json.loads(run("devices", "--json", "-").stdout)
    cpu = info["devices"][0]
    assert cpu["device"] == "cpu" and cpu["cores"] >= 1 and cpu["name"]
    flags = proc_cpu_flags()
    assert set(cpu["features"]) <= flags
    for feature in ("avx2", "avx512f", "avx512_bf16", "amx_bf16"):
        assert (feature in cpu["features"]) == (feature in flags), feature
    meminfo = pathlib.Path("/proc/meminfo").read_text()
    mem_kb = int(re.search(r"MemTotal:\s+(\d+) kB", meminfo).group(1))
    assert cpu["memory_bytes"] == mem_kb * 1024
    if not info["cuda"]["built_with_cuda"]:
        assert all(d["device"].startswith("cpu") for d in info["devices"])
        assert "built without CUDA" in text
