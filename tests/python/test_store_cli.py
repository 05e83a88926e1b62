"""The store's commands (db check, merge, history, compare, regressions) on real SQLite files.

Databases are filled with `framegate db test-write` (hidden, test-only: synthetic cells
through the real store), then edited with Python's sqlite3 through the documented schema.
"""
import json
import os
import sqlite3
import subprocess

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")


def run(*args, cwd=None):
    return subprocess.run([FRAMEGATE, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def write(db, run_id, cells=6, started_at=None):
    r = run("db", "test-write", "--db", db, "--run-id", run_id, "--cells", cells, "--finish")
    assert r.returncode == 0, r.stderr
    if started_at:
        sql(db, "UPDATE runs SET started_at = ? WHERE run_id = ?", started_at, run_id)


def sql(db, statement, *params):
    with sqlite3.connect(db) as conn:
        return conn.execute(statement, params).fetchall()


def cell_ids(db, run_id):
    return [r[0] for r in sql(db, "SELECT cell_id FROM cells WHERE run_id = ? ORDER BY id", run_id)]


def one_line_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("framegate: error: ") and r.stderr.count("\n") == 1, r.stderr
    for fragment in fragments:
        assert fragment in r.stderr, r.stderr


# Version 1, framegate's first schema, as its code wrote it (store/schema.cc).
V1_SCHEMA = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL DEFAULT '', state TEXT NOT NULL, host TEXT NOT NULL DEFAULT '',
  git_sha TEXT NOT NULL DEFAULT '', framegate_version TEXT NOT NULL DEFAULT '',
  libtorch_version TEXT NOT NULL DEFAULT '', tags TEXT NOT NULL DEFAULT '');
CREATE TABLE cells (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, cell_id TEXT NOT NULL,
  pipeline TEXT NOT NULL, device TEXT NOT NULL, policy TEXT NOT NULL, seed INTEGER NOT NULL,
  fault TEXT NOT NULL DEFAULT '', status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
  generation_seconds TEXT NOT NULL DEFAULT '[]', UNIQUE (run_id, cell_id));
CREATE TABLE metrics (cell_row INTEGER NOT NULL, name TEXT NOT NULL, value REAL,
  PRIMARY KEY (cell_row, name)) WITHOUT ROWID;
INSERT INTO runs VALUES ('old', '2023-01-01T00:00:00Z', '2023-01-01T01:00:00Z', 'finished',
  'h', 'abc', '0.0.9', '1.12.1', 'nightly');
INSERT INTO cells VALUES (1, 'old', 'aaaa000011112222', 'reference:tiny', 'cpu', 'fp32', 0, '',
  'PASS', '', '[0.5, 0.7, 0.6]');
INSERT INTO metrics VALUES (1, 'min_psnr', 40.0);
PRAGMA user_version = 1;
"""


def test_db_migrate_brings_an_old_file_to_the_current_schema(tmp_path):
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(V1_SCHEMA)
    check = run("db", "check", "--db", db)
    assert check.returncode == 0 and "schema version 1 (older: `framegate db migrate`" in check.stdout, check.stdout
    assert sql(db, "PRAGMA user_version") == [(1,)]  # db check only reads
    r = run("db", "migrate", "--db", db)
    assert r.returncode == 0, r.stderr
    current = sql(db, "PRAGMA user_version")[0][0]
    assert current > 1 and r.stdout.strip() == f"{db}: schema version 1 -> {current}"
    assert sql(db, "SELECT status, min_psnr, latency_median_s FROM series_points") == [("PASS", 40.0, 0.6)]
    again = run("db", "migrate", "--db", db)
    assert again.returncode == 0 and again.stdout.strip() == f"{db}: schema version {current}, already current"
    sql(db, "PRAGMA user_version = 99")
    one_line_error(run("db", "migrate", "--db", db), str(db), "newer")
    assert sql(db, "PRAGMA user_version") == [(99,)]
    one_line_error(run("db", "migrate", "--db", tmp_path / "missing.db"), "missing.db")
    assert not (tmp_path / "missing.db").exists()


def test_every_store_command_has_help():
    for command in (["db", "check"], ["db", "migrate"], ["merge"], ["history"], ["compare"], ["regressions"]):
        r = run(*command, "--help")
        assert r.returncode == 0, r.stderr
        assert "--db" in r.stdout or command == ["merge"], r.stdout


def test_db_check_reports_version_and_counts(tmp_path):
    db = tmp_path / "a.db"
    write(db, "r1", cells=5)
    r = run("db", "check", "--db", db)
    assert r.returncode == 0, r.stderr
    assert "integrity ok, schema version 12, journal wal" in r.stdout
    assert "  cells: 5\n" in r.stdout and "  runs: 1\n" in r.stdout and "  samples: 225\n" in r.stdout
    assert "  advice: 0\n" in r.stdout  # schema 4's table of the advisor's answers


def test_default_db_is_framegate_db_in_the_working_folder(tmp_path):
    write(tmp_path / "framegate.db", "r1", cells=2)
    r = run("db", "check", cwd=tmp_path)
    assert r.returncode == 0 and "framegate.db: integrity ok" in r.stdout


def test_bad_databases_are_one_line_errors_and_are_left_alone(tmp_path):
    missing = tmp_path / "missing.db"
    for command in (["db", "check"], ["history", "0123456789abcdef"], ["compare", "a", "b"],
                    ["regressions"]):
        one_line_error(run(*command, "--db", missing), str(missing), "no such database file")
    assert not missing.exists()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 200)
    for command in (["db", "check"], ["history", "0123456789abcdef"], ["compare", "a", "b"],
                    ["regressions"]):
        one_line_error(run(*command, "--db", garbage), str(garbage), "not a valid framegate database")
    assert garbage.read_bytes() == b"this is not a database" * 200
    newer = tmp_path / "newer.db"
    write(newer, "r1", cells=1)
    sql(newer, "PRAGMA user_version = 99")
    for command in (["db", "check"], ["regressions"], ["db", "test-write", "--run-id", "x"]):
        one_line_error(run(*command, "--db", newer), str(newer), "schema version 99 is newer")
    out = tmp_path / "out.db"
    one_line_error(run("merge", out, newer), "schema version 99 is newer")
    assert sql(newer, "SELECT count(*) FROM cells") == [(1,)]


def test_compare_finds_a_newly_failing_cell_and_exits_1(tmp_path):
    db = tmp_path / "c.db"
    write(db, "run-a", started_at="2024-05-01T03:00:00Z")
    write(db, "run-b", started_at="2024-05-02T03:00:00Z")
    same = run("compare", "run-a", "run-b", "--db", db)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "6 cells in both" in same.stdout and "verdict: no regression" in same.stdout
    broken = cell_ids(db, "run-b")[2]
    sql(db, "UPDATE cells SET status = 'NONFINITE', reason = 'NaN at step 3' "
            "WHERE run_id = 'run-b' AND cell_id = ?", broken)
    r = run("compare", "run-a", "run-b", "--db", db)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "newly_failing (1) REGRESSION" in r.stdout and broken in r.stdout
    assert "PASS -> NONFINITE  NaN at step 3" in r.stdout
    j = run("compare", "run-a", "run-b", "--db", db, "--json", "-")
    assert j.returncode == 1
    report = json.loads(j.stdout)
    assert report["regressions"] == 1
    assert report["changes"][0]["kind"] == "newly_failing" and report["changes"][0]["cell_id"] == broken


def test_compare_bad_input(tmp_path):
    db = tmp_path / "c.db"
    write(db, "run-a")
    one_line_error(run("compare", "run-a", "no-such-run", "--db", db), "no run 'no-such-run'", str(db))
    r = run("compare", "run-a", "run-a", "--db", db, "--alpha", "2")
    assert r.returncode == 2 and "--alpha" in r.stderr
    r = run("compare", "run-a", "--db", db)
    assert r.returncode == 2 and "RUN_B" in r.stderr


def test_history_by_id_and_by_filter(tmp_path):
    db = tmp_path / "h.db"
    for night in range(3):
        write(db, f"night-{night}", started_at=f"2024-05-0{night + 1}T03:00:00Z")
    cell = cell_ids(db, "night-0")[1]
    r = run("history", cell, "--db", db)
    assert r.returncode == 0, r.stderr
    assert cell in r.stdout and "(3 runs)" in r.stdout
    lines = [l for l in r.stdout.splitlines() if "night-" in l]
    assert [l.split()[1] for l in lines] == ["night-0", "night-1", "night-2"]  # oldest first
    j = json.loads(run("history", cell, "--db", db, "--json", "-", "--limit", "2").stdout)
    assert [p["run_id"] for p in j["cells"][0]["history"]] == ["night-1", "night-2"]
    assert len(j["cells"][0]["history"][0]["generation_seconds"]) == 5
    f = json.loads(run("history", "--filter", "policy=bf16,device=cpu", "--db", db, "--json", "-").stdout)
    assert sorted(c["label"] for c in f["cells"]) == ["reference:tiny cpu bf16 seed=1",
                                                      "reference:tiny cpu bf16 seed=5"]
    glob = json.loads(run("history", "--filter", "policy=fp*", "--db", db, "--json", "-").stdout)
    assert len(glob["cells"]) == 4  # seeds 0..5: fp32 (0, 4), fp16-emulated (2), fp8-e4m3 (3)


def test_history_bad_input(tmp_path):
    db = tmp_path / "h.db"
    write(db, "r1")
    one_line_error(run("history", "--filter", "colour=red", "--db", db), "unknown key 'colour'")
    one_line_error(run("history", "--filter", "policy", "--db", db), "not KEY=VALUE")
    one_line_error(run("history", "--filter", "policy=nope", "--db", db), "no cell matches")
    one_line_error(run("history", "ffffffffffffffff", "--db", db), "no cell 'ffffffffffffffff'")
    one_line_error(run("history", "--db", db), "give a CELL_ID or --filter")
    injected = "x' OR '1'='1"
    one_line_error(run("history", "--filter", f"policy={injected}", "--db", db), "no cell matches")


def test_regressions_flags_two_consecutive_failures_only(tmp_path):
    db = tmp_path / "r.db"
    for night in range(5):
        write(db, f"night-{night}", started_at=f"2024-05-0{night + 1}T03:00:00Z")
    cell = cell_ids(db, "night-0")[0]
    fail = "UPDATE cells SET status = 'FAIL', reason = 'min_psnr 21 < 30' WHERE run_id = ? AND cell_id = ?"
    sql(db, fail, "night-4", cell)
    once = run("regressions", "--db", db)
    assert once.returncode == 0, once.stdout + once.stderr
    assert "pending     failing  status" in once.stdout
    sql(db, fail, "night-3", cell)
    twice = run("regressions", "--db", db)
    assert twice.returncode == 1, twice.stdout + twice.stderr
    assert "REGRESSION  failing  status  reference:tiny cpu fp32 seed=0" in twice.stdout
    assert "2 runs in a row since night-3" in twice.stdout and "min_psnr 21 < 30" in twice.stdout
    report = json.loads(run("regressions", "--db", db, "--json", "-").stdout)
    assert report["regressions"] == 1 and report["findings"][0]["cell_ids"] == [cell]
    baseline = run("regressions", "--db", db, "--baseline", "night-1")
    assert baseline.returncode == 1 and "(baseline night-1)" in baseline.stdout
    window = run("regressions", "--db", db, "--since", "2024-05-04")
    assert window.returncode == 0, window.stdout  # failing throughout this window: not new


def test_regressions_bad_input(tmp_path):
    db = tmp_path / "r.db"
    write(db, "r1")
    one_line_error(run("regressions", "--db", db, "--since", "yesterday"), "--since 'yesterday'")
    one_line_error(run("regressions", "--db", db, "--baseline", "release-9"), "release-9", str(db))


def test_merge_is_idempotent_and_reports_conflicts(tmp_path):
    shard1, shard2, out = tmp_path / "s1.db", tmp_path / "s2.db", tmp_path / "out.db"
    write(shard1, "run-1", cells=4)
    write(shard2, "run-2", cells=3)
    first = run("merge", out, shard1, shard2)
    assert first.returncode == 0, first.stderr
    assert "2 runs added, 0 updated, 7 cells added, 0 already present" in first.stdout
    dump = "\n".join(sqlite3.connect(out).iterdump())
    again = run("merge", out, shard1, shard2)
    assert again.returncode == 0 and "0 cells added, 7 already present" in again.stdout
    assert "\n".join(sqlite3.connect(out).iterdump()) == dump
    sql(shard2, "UPDATE cells SET status = 'CRASH' WHERE id = (SELECT min(id) FROM cells)")
    conflict = run("merge", out, shard2)
    assert conflict.returncode == 1
    assert "framegate: conflict: " in conflict.stderr and "status \"PASS\" vs \"CRASH\"" in conflict.stderr
    assert "1 conflicts" in conflict.stdout
    assert sql(out, "SELECT count(*) FROM cells WHERE status = 'CRASH'") == [(0,)]


def test_merge_bad_input(tmp_path):
    out = tmp_path / "out.db"
    one_line_error(run("merge", out, tmp_path / "nope.db"), "nope.db", "no such database file")
    write(out, "r1", cells=1)
    one_line_error(run("merge", out, out), "is the output database itself")
    r = run("merge", out)
    assert r.returncode == 2 and "IN" in r.stderr


def test_a_damaged_database_is_a_one_line_error(tmp_path):
    db = tmp_path / "damaged.db"
    write(db, "r1", cells=40)
    size = db.stat().st_size
    assert size > 8 * 4096
    data = bytearray(db.read_bytes())
    for page in range(2, size // 4096):  # scribble over every page but the header page
        data[page * 4096 + 16: page * 4096 + 48] = b"\xff" * 32
    db.write_bytes(bytes(data))
    r = run("db", "check", "--db", db)
    assert r.returncode == 2, r.stdout
    assert r.stderr.count("\n") == 1 and str(db) in r.stderr, r.stderr
    assert "integrity check failed" in r.stderr or "not a valid framegate database" in r.stderr
