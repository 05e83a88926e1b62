"""The attention-backend axis on the CPU: policies that differ only in `attention_backend`
run as separate cells of one matrix, are judged against the same golden and stored side by
side. LibTorch 2.2 on has two CPU kernels behind SDPA (math, flash): two results that differ
and both PASS. LibTorch 1.13 has the math path only: flash is UNSUPPORTED, with why."""
import json
import os
import sqlite3
import subprocess

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")

MATRIX = """
[axes]
pipelines = ["tiny"]
devices = ["cpu"]
policies = ["fp32-math", "fp32-flash"]
steps = [2]

[policy.fp32-math]
based_on = "fp32"
attention_backend = "math"

[policy.fp32-flash]
based_on = "fp32"
attention_backend = "flash"
"""


def framegate(*args, cwd=None):
    return subprocess.run([FRAMEGATE, *args], capture_output=True, text=True, cwd=cwd)


def libtorch_at_least(major, minor):
    version = json.loads(framegate("info", "--json", "-").stdout)["libtorch"]
    return tuple(int(p) for p in version.split(".")[:2]) >= (major, minor)


def test_two_cpu_attention_backends_are_two_stored_results(tmp_path):
    golden = tmp_path / "golden"
    made = framegate("golden", "make", "--size", "tiny", "--steps", "2", "--threads", "1",
                     "--golden-dir", str(golden))
    assert made.returncode == 0, made.stdout + made.stderr
    (tmp_path / "m.toml").write_text(MATRIX)
    r = framegate("run", "m.toml", "--threads", "1", "--golden-dir", str(golden),
                  "--json", str(tmp_path / "run.json"), cwd=tmp_path)
    cells = {c["policy"]: c for c in json.loads((tmp_path / "run.json").read_text())["cells"]}
    with sqlite3.connect(tmp_path / "framegate.db") as db:
        stored = {policy: (status, observed, psnr) for policy, status, observed, psnr in db.execute(
            "SELECT s.policy, c.status, c.observed, m.min_psnr FROM cells c "
            "JOIN cell_specs s ON s.cell_id = c.cell_id LEFT JOIN metrics m ON m.cell_row = c.id")}
    assert sorted(stored) == ["fp32-flash", "fp32-math"]
    if not libtorch_at_least(2, 2):
        assert r.returncode == 0, r.stdout + r.stderr  # UNSUPPORTED does not fail a run
        assert stored["fp32-math"][0] == "PASS"
        assert cells["fp32-flash"]["status"] == "UNSUPPORTED"
        assert "only the math attention path" in cells["fp32-flash"]["reason"]
        return
    assert r.returncode == 0, r.stdout + r.stderr
    for policy, backend in (("fp32-math", "math"), ("fp32-flash", "flash")):
        status, observed, psnr = stored[policy]
        assert status == "PASS", cells[policy]["reason"]
        assert f"attention: {backend} (SDPA on the CPU)" in observed
        assert psnr is not None and psnr > 60  # compared with the golden: near, not identical
    assert stored["fp32-math"][2] != stored["fp32-flash"][2]  # two kernels, two results
