"""Crash safety: `framegate run` killed with SIGKILL at random moments, ten times, into one
database. Afterwards the database passes integrity_check, every cell recorded before a
kill is still there, no cell is stored twice, and --resume completes a killed run."""
import os
import random
import signal
import sqlite3
import subprocess
import time

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")
TRIALS = int(os.environ.get("FRAMEGATE_CRASH_TRIALS", "10"))
POLICIES = "fp32,bf16,fp16-emulated,fp8e4m3-bf16,fp8e5m2-bf16,tf32"
ARGS = ["--size", "tiny", "--steps", "2", "--threads", "1", "--policy", POLICIES]


def cells_by_run(db):
    with sqlite3.connect(db, timeout=30) as c:
        rows = c.execute("SELECT run_id, cell_id FROM cells").fetchall()
    by_run = {}
    for run_id, cell_id in rows:
        by_run.setdefault(run_id, []).append(cell_id)
    return by_run


def test_sigkill_at_random_moments_loses_nothing_finished(tmp_path):
    goldens = tmp_path / "golden"
    subprocess.run([FRAMEGATE, "golden", "make", "--size", "tiny", "--steps", "2", "--threads", "1",
                    "--golden-dir", str(goldens)], check=True, capture_output=True)
    db = tmp_path / "framegate.db"
    rng = random.Random(20261121)
    killed = []
    for trial in range(TRIALS):
        p = subprocess.Popen([FRAMEGATE, "run", *ARGS, "--golden-dir", str(goldens), "--db", str(db)],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        run_id = p.stdout.readline().split()[1]
        time.sleep(rng.uniform(0.2, 6.0))
        before = len(cells_by_run(db).get(run_id, [])) if db.exists() else 0
        p.send_signal(signal.SIGKILL)
        p.wait()
        after = cells_by_run(db).get(run_id, [])
        assert len(after) >= before, f"trial {trial}: cells recorded before the kill were lost"
        assert len(after) == len(set(after)), f"trial {trial}: a cell stored twice"
        killed.append((run_id, len(after)))
        with sqlite3.connect(db) as c:
            assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # Resume the killed run that had the fewest cells, and one more.
    for run_id, _ in sorted(killed, key=lambda k: k[1])[:2]:
        r = subprocess.run([FRAMEGATE, "run", *ARGS, "--golden-dir", str(goldens), "--db", str(db),
                            "--resume", run_id], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        cells = cells_by_run(db)[run_id]
        assert len(cells) == len(POLICIES.split(",")) and len(set(cells)) == len(cells)
        with sqlite3.connect(db) as c:
            assert c.execute("SELECT state FROM runs WHERE run_id=?", (run_id,)).fetchone()[0] == "finished"
    r = subprocess.run([FRAMEGATE, "db", "check", "--db", str(db)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
