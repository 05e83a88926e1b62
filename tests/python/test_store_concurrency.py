"""The stores under real concurrent processes and a real SIGKILL: the results database, and
a golden folder that several `framegate golden make` write into at once.

Writers are `framegate db test-write` (a hidden, test-only subcommand): it records synthetic
cells through ResultStore, one transaction per cell as the runner does, and prints
"recorded <cell id>" after each commit.
"""
import os
import signal
import sqlite3
import subprocess

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")


def writer(db, run_id, cells, *extra):
    return [FRAMEGATE, "db", "test-write", "--db", str(db), "--run-id", run_id,
            "--cells", str(cells), *extra]


def query(db, sql, *params):
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def test_four_processes_writing_one_new_database_lose_nothing(tmp_path):
    db = tmp_path / "fleet.db"
    cells = 150
    procs = [subprocess.Popen(writer(db, f"run-{i}", cells, "--device", f"cuda:{i}", "--finish"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err
        assert "locked" not in err and "busy" not in err
        assert out.count("recorded ") == cells
    assert query(db, "SELECT count(*) FROM cells") == [(4 * cells,)]
    assert query(db, "SELECT run_id, count(*) FROM cells GROUP BY run_id ORDER BY run_id") == [
        (f"run-{i}", cells) for i in range(4)]
    assert query(db, "SELECT count(*) FROM samples") == [(4 * cells * 45,)]
    assert query(db, "SELECT DISTINCT state FROM runs") == [("finished",)]
    check = subprocess.run([FRAMEGATE, "db", "check", "--db", str(db)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert "integrity ok, schema version 12" in check.stdout


@pytest.mark.parametrize("kill_after", [0, 1, 37, 120])
def test_sigkill_mid_write_keeps_every_committed_cell_and_resume_completes(tmp_path, kill_after):
    """The writer runs in lockstep (--handshake): before each commit it prints "committing
    <id>" and waits for a line on stdin. The test lets `kill_after` cells commit, then kills
    the writer while the next cell's transaction is open. No timing decides the outcome."""
    db = tmp_path / "killed.db"
    total = 200
    proc = subprocess.Popen(writer(db, "night", total, "--handshake"), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    committed = []
    in_flight = None
    for line in proc.stdout:
        word, cell_id = line.split()
        if word == "recorded":
            committed.append(cell_id)
        elif len(committed) == kill_after:  # "committing": rows written, no commit yet
            in_flight = cell_id
            proc.send_signal(signal.SIGKILL)
            break
        else:
            proc.stdin.write("\n")
            proc.stdin.flush()
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert len(committed) == kill_after and in_flight not in committed

    check = subprocess.run([FRAMEGATE, "db", "check", "--db", str(db)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    stored = {row[0] for row in query(db, "SELECT cell_id FROM cells WHERE run_id = 'night'")}
    assert stored == set(committed), "a committed cell was lost or the open transaction kept"
    # Every stored cell is whole: its metrics and all its samples are there.
    assert query(db, "SELECT count(*) FROM metrics") == [(len(stored),)]
    assert query(db, "SELECT count(*) FROM samples") == [(45 * len(stored),)]
    assert query(db, "SELECT state FROM runs WHERE run_id = 'night'") == [("running",)]

    resumed = subprocess.run(writer(db, "night", total, "--finish"), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.count("recorded ") == total - len(stored)  # finished cells skipped
    assert query(db, "SELECT count(*), count(DISTINCT cell_id) FROM cells") == [(total, total)]
    assert query(db, "SELECT state FROM runs WHERE run_id = 'night'") == [("finished",)]


def test_four_processes_making_goldens_in_one_folder_lose_none(tmp_path):
    """A sweep's jobs and per-seed CI jobs make goldens into one folder at once: each adds its
    entry to MANIFEST.json, which used to be read and rewritten unlocked through one shared
    temporary file (an entry lost, or "MANIFEST.json: No such file or directory")."""
    goldens = tmp_path / "goldens"
    procs = [subprocess.Popen([FRAMEGATE, "golden", "make", "--size", "tiny", "--steps", "2", "--threads", "1",
                               "--seed", str(seed), "--golden-dir", str(goldens)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for seed in range(4)]
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err
    listed = subprocess.run([FRAMEGATE, "golden", "list", "--golden-dir", str(goldens)],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert sum("seed" in line and ".safetensors" in line for line in listed.stdout.splitlines()) == 4, listed.stdout
    verified = subprocess.run([FRAMEGATE, "golden", "check", "--golden-dir", str(goldens)],
                              capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert not list(goldens.glob("*.tmp*"))
