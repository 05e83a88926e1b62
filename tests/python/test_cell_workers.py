"""`framegate run` with persistent cell workers (the default) against a process per cell
(`--isolation process`): the same matrix gives the same stored results, a worker reuses
the model it built, and a worker is replaced after N cells or past an RSS bound. Real
processes, real SQLite; nothing here depends on timing."""
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

FAST = ["--size", "tiny", "--steps", "2", "--threads", "1"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Goldens and a matrix whose healthy cells follow cells that fail in every way a cell
    can (NONFINITE, ERROR from a package, bad input is not among them): a healthy cell
    after them must come out as it does in a process of its own."""
    root = tmp_path_factory.mktemp("workers")
    goldens = root / "goldens"
    for args in (["--seed", "0"], ["--seed", "1"], ["--seed", "0", "--fault", "attn-overflow"]):
        subprocess.run([FRAMEGATE, "golden", "make", *FAST, *args, "--golden-dir", goldens],
                       check=True, capture_output=True, timeout=300)
    subprocess.run([sys.executable, str(MAKE_PACKAGES), str(root / "packages")], check=True,
                   capture_output=True, timeout=300)
    for name in ("clean", "f1-time-embed"):
        subprocess.run([FRAMEGATE, "golden", "make", "--model", root / "packages" / name,
                        "--golden-dir", goldens, "--threads", "1"], check=True, capture_output=True,
                       timeout=300)
    matrix = root / "mixed.toml"
    matrix.write_text(f"""
name = "mixed"
description = "healthy cells before and after failing ones"
timeout = 300
[axes]
pipelines = ["tiny"]
devices = ["cpu"]
policies = ["fp32", "fp16-emulated", "bf16"]
seeds = [0, 1]
steps = [2]
[[include]]
policy = "fp16-emulated"
fault = "attn-overflow"
[[include]]
pipeline = "{root / 'packages' / 'f1-time-embed'}"
policy = "bf16"
[[include]]
pipeline = "{root / 'packages' / 'clean'}"
policy = "bf16"
""")
    return root, goldens, matrix


def run(cwd, matrix, goldens, *args):
    out = cwd / f"run-{len(list(cwd.glob('run-*.json')))}.json"
    r = subprocess.run([FRAMEGATE, "run", matrix, "--golden-dir", goldens, "--threads", "1",
                        "--db", cwd / "framegate.db", "--json", out, *map(str, args)],
                       capture_output=True, text=True, cwd=cwd, timeout=900)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return {c["cell_id"]: c for c in json.loads(out.read_text())["cells"]}


def judged(cell):
    """What a cell's result says about its frames (not its timings)."""
    keys = ("status", "reason", "error_class", "error_module", "error_op", "metrics", "health",
            "first_nonfinite", "policy_used", "observed")
    return {k: cell.get(k) for k in keys}


def test_workers_store_exactly_what_a_process_per_cell_stores(setup, tmp_path):
    _, goldens, matrix = setup
    workers = run(tmp_path, matrix, goldens, "--isolation", "worker")
    processes = run(tmp_path, matrix, goldens, "--isolation", "process")
    assert len(workers) == 9 and workers.keys() == processes.keys()
    statuses = sorted(c["status"] for c in workers.values())
    assert statuses.count("PASS") == 7 and "NONFINITE" in statuses and "ERROR" in statuses
    for cell_id, cell in workers.items():
        assert judged(cell) == judged(processes[cell_id]), cell_id


def test_a_worker_reuses_the_model_of_the_previous_cell_of_the_same_model_and_policy(setup, tmp_path):
    _, goldens, matrix = setup
    cells = run(tmp_path, matrix, goldens)  # worker is the default
    by_key = {}
    for c in cells.values():
        by_key.setdefault((c["model_dir"], c["size"], c["policy"], c["fault"]), []).append(c)
    fp32 = sorted(by_key[("", "tiny", "fp32", "")], key=lambda c: c["seed"])
    assert fp32[0]["timings"]["load_seconds"] > 0
    assert fp32[1]["timings"]["load_seconds"] < fp32[0]["timings"]["load_seconds"] / 10, \
        "seed 1 runs on the model seed 0 built"
    # A process per cell builds every model.
    for c in run(tmp_path, matrix, goldens, "--isolation", "process").values():
        if c["status"] == "PASS" and not c["model_dir"]:
            assert c["timings"]["load_seconds"] > 0


@pytest.mark.parametrize("limit", [["--worker-cells", "1"], ["--worker-rss-mib", "1"]])
def test_a_worn_worker_is_replaced_so_every_cell_builds_its_model(setup, tmp_path, limit):
    _, goldens, matrix = setup
    cells = run(tmp_path, matrix, goldens, *limit)
    reference = [c for c in cells.values() if not c["model_dir"] and c["status"] == "PASS"]
    assert len(reference) == 6
    loads = sorted(c["timings"]["load_seconds"] for c in reference)
    reused = run(tmp_path, matrix, goldens)
    reused_loads = sorted(c["timings"]["load_seconds"] for c in reused.values()
                          if not c["model_dir"] and c["status"] == "PASS")
    # With a new worker per cell, no load is the near-zero of a reused model.
    assert loads[0] > reused_loads[0] * 10
    for c in cells.values():
        assert judged(c) == judged(reused[c["cell_id"]])


def test_a_kernel_path_device_gets_its_own_worker_with_its_environment(setup, tmp_path):
    if "avx2" not in pathlib.Path("/proc/cpuinfo").read_text():
        pytest.skip("the CPU has no AVX2")
    _, goldens, _ = setup
    matrix = tmp_path / "paths.toml"
    matrix.write_text('name = "paths"\ndescription = "two kernel paths"\n[axes]\npipelines = ["tiny"]\n'
                      'devices = ["cpu:default", "cpu:avx2"]\npolicies = ["fp32"]\nseeds = [0]\n'
                      'steps = [2]\n')
    cells = run(tmp_path, matrix, goldens)
    by_device = {c["device"]: c for c in cells.values()}
    assert by_device.keys() == {"cpu:default", "cpu:avx2"}
    assert all(c["status"] == "PASS" for c in cells.values())
    # ATen's default kernels sum in another order than AVX2's: different frames.
    assert by_device["cpu:default"]["metrics"] != by_device["cpu:avx2"]["metrics"]
