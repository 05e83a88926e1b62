"""Timings as Google Benchmark JSON: the fields Google Benchmark's tools/compare.py reads,
checked the way compare.py (gbench/report.py, util.py) reads them, and compare.py itself
run on two framegate runs when it is installed (Debian: libbenchmark-tools)."""
import json
import os
import pathlib
import subprocess

import pytest

import reports_synthetic_run as synthetic

RENDER = synthetic.render_tool()
pytestmark = pytest.mark.skipif(not RENDER or not os.path.exists(RENDER), reason="framegate_render_report not built")
COMPARE = next((p for p in (os.environ.get("GBENCH_COMPARE_PY", ""), "/usr/share/benchmark/compare.py")
                if p and os.path.exists(p)), None)
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
REPEATS = 5  # reports_synthetic_run: five timed repeats per cell with timings


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    paths = []
    for name, speed in (("base", 1.0), ("slow", 1.3)):
        out = root / f"{name}.json"
        r = subprocess.run([RENDER, str(synthetic.write_run(root / name, speed=speed)), "--bench-json", str(out)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        paths.append(out)
    return paths


def test_fields_parse_as_compare_py_reads_them(two_runs):
    base = json.loads(two_runs[0].read_text())
    assert isinstance(base["context"], dict) and base["context"]["host_name"] == "nightly-01"
    benchmarks = base["benchmarks"]
    # util.sort_benchmark_results keys, report.partition_benchmarks / get_difference_report fields.
    for b in benchmarks:
        assert isinstance(b["name"], str) and b["run_type"] in ("iteration", "aggregate")
        assert b["time_unit"] in TIME_UNITS and b["time_unit"] == "ms"
        assert isinstance(b["real_time"], float) and isinstance(b["cpu_time"], float)
        assert b["repetitions"] == REPEATS and isinstance(b["family_index"], int)
        if b["run_type"] == "aggregate":
            assert b["aggregate_name"] in ("mean", "median", "stddev")
            assert b["name"] == b["run_name"] + "_" + b["aggregate_name"]
        else:
            assert 0 <= b["repetition_index"] < REPEATS and b["name"] == b["run_name"]
    names = list(dict.fromkeys(b["name"] for b in benchmarks))
    runs = [n for n in names if not n.endswith(("_mean", "_median", "_stddev"))]
    # Cells with timed repeats only: not ERROR, UNSUPPORTED, TIMEOUT, CRASH.
    assert "reference:tiny/cpu/fp32/seed0" in runs and "reference:tiny/cpu/fp8-e5m2/seed0" not in runs
    assert len(runs) == 6 and len(names) == 6 * 4
    repeats = [b["real_time"] for b in benchmarks
               if b["name"] == "reference:tiny/cpu/bf16/seed0" and b["run_type"] == "iteration"]
    assert repeats == pytest.approx([1200, 1250, 1220, 1310, 1180])
    median = next(b for b in benchmarks if b["name"] == "reference:tiny/cpu/bf16/seed0_median")
    assert median["real_time"] == pytest.approx(1220)
    # compare.py's geomean input: seconds from real_time x unit.
    assert repeats[0] * TIME_UNITS["ms"] == pytest.approx(1.2)


@pytest.mark.skipif(COMPARE is None, reason="Google Benchmark's compare.py is not installed (libbenchmark-tools)")
def test_compare_py_compares_two_framegate_runs(two_runs, tmp_path):
    diff = tmp_path / "diff.json"
    r = subprocess.run(["/usr/bin/python3", COMPARE, "--no-color", "-d", str(diff), "benchmarks",
                        str(two_runs[0]), str(two_runs[1])], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "reference:tiny/cpu/fp32/seed0_median" in r.stdout
    assert "U Test, Repetitions: 5 vs 5" in r.stdout
    report = {entry["name"]: entry for entry in json.loads(diff.read_text())}
    median = report["reference:tiny/cpu/fp32/seed0_median"]
    assert median["measurements"][0]["time"] == pytest.approx(0.3)
    assert median["aggregate_name"] == "median" and median["time_unit"] == "ms"
    repeats = report["reference:tiny/cpu/fp32/seed0"]
    assert len(repeats["measurements"]) == REPEATS
    assert repeats["utest"]["time_pvalue"] < 0.05  # every repeat is 30% slower
