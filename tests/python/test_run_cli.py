"""`framegate run`: process isolation, resume, shards and fallback, on real processes and a
real SQLite file."""
import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")

FAST = ["--size", "tiny", "--steps", "2", "--threads", "1"]


@pytest.fixture(scope="module")
def goldens(tmp_path_factory):
    d = tmp_path_factory.mktemp("golden")
    for fault in ([], ["--fault", "attn-overflow"]):
        subprocess.run([FRAMEGATE, "golden", "make", *FAST, "--golden-dir", str(d), *fault],
                       check=True, capture_output=True)
    return d


def run(tmp_path, *args, env=None):
    return subprocess.run([FRAMEGATE, "run", *args], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, **(env or {})})


def stored(db):
    with sqlite3.connect(db) as c:
        return sorted(c.execute("SELECT s.policy, c.status FROM cells c JOIN cell_specs s USING (cell_id)").fetchall())


@pytest.mark.parametrize("isolation", ["worker", "process"])
def test_crash_abort_and_hang_end_their_cells_and_the_run_goes_on(tmp_path, goldens, isolation):
    out = tmp_path / "run.json"
    r = run(tmp_path, *FAST, "--policy", "fp32,bf16,fp16-emulated,fp8e4m3-bf16,fp8e5m2-bf16",
            "--golden-dir", str(goldens), "--timeout", "20", "--json", str(out), "--isolation", isolation,
            env={"FRAMEGATE_TEST_CELL_FAULTS": "bf16:segv,fp16-emulated:abort,fp8e4m3-bf16:hang"})
    assert r.returncode == 1, r.stdout + r.stderr
    cells = {c["policy"]: c for c in json.loads(out.read_text())["cells"]}
    assert cells["fp32"]["status"] == "PASS" and cells["fp8e5m2-bf16"]["status"] == "PASS"
    assert cells["bf16"]["status"] == "CRASH" and "SIGSEGV" in cells["bf16"]["reason"]
    assert cells["fp16-emulated"]["status"] == "CRASH" and "SIGABRT" in cells["fp16-emulated"]["reason"]
    assert cells["fp8e4m3-bf16"]["status"] == "TIMEOUT"
    assert "framegate check --size tiny --device cpu --policy bf16" in cells["bf16"]["repro"]
    assert len(stored(tmp_path / "framegate.db")) == 5
    assert json.loads(out.read_text())["run_id"] in r.stdout.splitlines()[0]
    verdict = json.loads(out.read_text())["device_verdicts"][0]
    assert verdict["device"] == "cpu" and not verdict["qualified"] and len(verdict["failing"]) == 3


def test_interrupted_run_resumes_without_duplicates(tmp_path, goldens):
    args = [*FAST, "--policy", "fp32,bf16,fp8e4m3-bf16", "--golden-dir", str(goldens)]
    p = subprocess.Popen([FRAMEGATE, "run", *args], cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "FRAMEGATE_TEST_CELL_FAULTS": "fp8e4m3-bf16:hang"})
    run_id = p.stdout.readline().split()[1]
    db = tmp_path / "framegate.db"
    deadline = time.time() + 120
    while time.time() < deadline and len(stored(db)) < 2:
        time.sleep(0.5)
    assert len(stored(db)) == 2, "the first two cells should be recorded while the third hangs"
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 130, out
    assert "--resume " + run_id in out
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT state FROM runs WHERE run_id=?", (run_id,)).fetchone()[0] == "interrupted"
    r = run(tmp_path, *args, "--resume", run_id)
    assert r.returncode == 0, r.stdout + r.stderr
    assert stored(db) == [("bf16", "PASS"), ("fp32", "PASS"), ("fp8e4m3-bf16", "PASS")]
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT state FROM runs WHERE run_id=?", (run_id,)).fetchone()[0] == "finished"


def test_shards_partition_the_matrix(tmp_path):
    listed = lambda *a: {c["cell_id"] for c in json.loads(subprocess.run(
        [FRAMEGATE, "list", "nightly", "--json", "-", *a], capture_output=True, text=True,
        check=True).stdout)["cells"]}
    everything = listed()
    shards = [listed("--shard", f"{i}/3") for i in (1, 2, 3)]
    assert set().union(*shards) == everything
    assert sum(len(s) for s in shards) == len(everything)


def test_fallback_names_the_policy_that_fixed_f2(tmp_path, goldens):
    out = tmp_path / "run.json"
    r = run(tmp_path, *FAST, "--policy", "fp16-emulated", "--fault", "attn-overflow", "--fallback",
            "--golden-dir", str(goldens), "--json", str(out))
    cell = json.loads(out.read_text())["cells"][0]
    assert cell["policy"] == "fp16-emulated" and cell["policy_used"] == "bf16", cell
    assert cell["status"] == "PASS", cell["reason"]
    assert cell["reason"].startswith("fallback: fp16-emulated NONFINITE"), cell["reason"]
    assert r.returncode == 0


def test_report_reads_the_stored_run(tmp_path, goldens):
    r = run(tmp_path, *FAST, "--policy", "fp32", "--golden-dir", str(goldens))
    assert r.returncode == 0, r.stdout + r.stderr
    junit = tmp_path / "junit.xml"
    r = subprocess.run([FRAMEGATE, "report", "latest", "--junit", str(junit)], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert 'tests="1"' in junit.read_text() and "qualified" in r.stdout


def test_bad_matrix_and_flags_are_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[axes]\npolices = ["fp32"]\n')
    r = run(tmp_path, str(bad))
    assert r.returncode == 2 and "bad.toml:2:1" in r.stderr, r.stderr
    r = run(tmp_path, "smoke", "--policy", "fp32")
    assert r.returncode == 2
    r = run(tmp_path, "smoke", "--shard", "4/3")
    assert r.returncode == 2 and "4/3" in r.stderr
