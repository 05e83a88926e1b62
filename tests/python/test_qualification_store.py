"""Qualification verdicts in the store (schema 9 on) through the real binary: `history
--qualification --device`, `db check`, `db migrate` from version 8, and `merge`.

Runs are written with `framegate db test-write` (hidden, test-only); their verdicts are
inserted with Python's sqlite3 through the documented schema (docs/store.md), as
`framegate qualify` would store them through ResultStore::RecordQualification.
"""
import json
import os
import sqlite3
import subprocess

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")

FAULTY_REASONS = [
    {"kind": "persistent_mismatch", "severity": "FAULTY", "cell": "reference:tiny fp32 seed 0", "step": 3,
     "module": "blocks.1.ff.0", "detail": "max_abs 0.25 in 3 of 3 repeats"},
    {"kind": "slow", "severity": "DEGRADED", "cell": "", "step": None, "module": "", "detail": "1.4x the fastest"},
]


def run(*args, cwd=None):
    return subprocess.run([FRAMEGATE, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def sql(db, statement, *params):
    with sqlite3.connect(db) as conn:
        return conn.execute(statement, params).fetchall()


def one_line_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("framegate: error: ") and r.stderr.count("\n") == 1, r.stderr
    for fragment in fragments:
        assert fragment in r.stderr, r.stderr


def qualify_run(db, run_id, started_at, verdicts):
    """A run row (as BeginRun writes it) and its verdicts: {device: (verdict, reasons)}."""
    r = run("db", "test-write", "--db", db, "--run-id", run_id, "--cells", 0, "--finish")
    assert r.returncode == 0, r.stderr
    sql(db, "UPDATE runs SET started_at = ?, command = 'framegate qualify' WHERE run_id = ?", started_at, run_id)
    for device, (verdict, reasons) in verdicts.items():
        sql(db, "INSERT INTO qualifications (run_id, device, kind, verdict, cells, repeats, seconds, reasons, "
                "recorded_at) VALUES (?, ?, 'cpu', ?, 8, 3, 4.5, ?, ?)",
            run_id, device, verdict, json.dumps(reasons), started_at)


def test_history_of_a_device_over_time_text_and_json(tmp_path):
    db = tmp_path / "q.db"
    qualify_run(db, "night-2", "2024-05-02T03:00:00Z", {"cpu:avx512": ("FAULTY", FAULTY_REASONS)})
    qualify_run(db, "night-1", "2024-05-01T03:00:00Z",
                {"cpu:avx512": ("PASS", []), "cpu:avx2": ("DEGRADED", FAULTY_REASONS[1:])})
    r = run("history", "--qualification", "--device", "cpu:avx512", "--db", db)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "device cpu:avx512: 2 qualifications"
    assert "night-1" in lines[1] and lines[1].endswith("PASS")
    assert "night-2" in lines[2] and lines[2].endswith("FAULTY  (2 reasons)")
    assert lines[3].strip() == "persistent_mismatch reference:tiny fp32 seed 0 step 3 (blocks.1.ff.0): " \
                               "max_abs 0.25 in 3 of 3 repeats"
    j = json.loads(run("history", "--qualification", "--device", "cpu:avx512", "--db", db, "--json", "-").stdout)
    assert j["device"] == "cpu:avx512"
    assert [(v["run_id"], v["verdict"]) for v in j["verdicts"]] == [("night-1", "PASS"), ("night-2", "FAULTY")]
    assert j["verdicts"][1]["reasons"] == FAULTY_REASONS
    assert j["verdicts"][1]["started_at"] == "2024-05-02T03:00:00Z" and j["verdicts"][1]["cells"] == 8
    # The documented one query answers the same.
    rows = sql(db, "SELECT run_id, verdict FROM device_verdicts WHERE device = ? ORDER BY started_at, run_id",
               "cpu:avx512")
    assert rows == [("night-1", "PASS"), ("night-2", "FAULTY")]
    never = run("history", "--qualification", "--device", "cuda:0", "--db", db)
    assert never.returncode == 0 and never.stdout == "device cuda:0: never qualified\n", never


def test_history_qualification_bad_input(tmp_path):
    db = tmp_path / "q.db"
    qualify_run(db, "r1", "2024-05-01T03:00:00Z", {"cpu": ("PASS", [])})
    one_line_error(run("history", "--qualification", "--db", db), "--qualification needs --device")
    one_line_error(run("history", "--device", "cpu", "--db", db), "--device needs --qualification")
    one_line_error(run("history", "--qualification", "--device", "cpu", "--filter", "policy=x", "--db", db),
                   "takes no CELL_ID or --filter")
    missing = tmp_path / "missing.db"
    one_line_error(run("history", "--qualification", "--device", "cpu", "--db", missing), str(missing))
    assert not missing.exists()
    not_sqlite = tmp_path / "text.db"
    not_sqlite.write_text("not a database\n" * 100)
    one_line_error(run("history", "--qualification", "--device", "cpu", "--db", not_sqlite), str(not_sqlite))
    assert not_sqlite.read_text() == "not a database\n" * 100
    sql(db, "UPDATE qualifications SET reasons = 'not json'")
    one_line_error(run("history", "--qualification", "--device", "cpu", "--db", db),
                   "run r1 device cpu: qualifications.reasons is not JSON")
    with pytest.raises(sqlite3.IntegrityError):  # the CHECK constraint
        sql(db, "UPDATE qualifications SET verdict = 'FAIL'")


# Back from version 12 to the series_points of versions 3-9: the advice's note and verified
# (12) and packed_points and its triggers (11) dropped, the two point-writing triggers as
# those versions wrote them (store/schema.cc).
V3_POINT_TRIGGERS = """
ALTER TABLE advice DROP COLUMN note;
ALTER TABLE advice DROP COLUMN verified;
DROP TRIGGER packed_points_point_insert;
DROP TRIGGER packed_points_point_update;
DROP TRIGGER packed_points_point_move;
DROP TRIGGER packed_points_point_delete;
DROP TABLE packed_points;
DROP TRIGGER series_points_cell_insert;
DROP TRIGGER series_points_cell_update;
ALTER TABLE series_points DROP COLUMN cell_row;
CREATE TRIGGER series_points_cell_insert AFTER INSERT ON cells BEGIN
  INSERT OR REPLACE INTO series_points (run_id, cell_id, status, latency_median_s, min_psnr,
                                        mean_ssim, rel_l2)
    SELECT new.run_id, new.cell_id, new.status, new.latency_median_s, m.min_psnr,
           m.mean_ssim, m.rel_l2
    FROM (SELECT 1) LEFT JOIN metrics m ON m.cell_row = new.id;
END;
CREATE TRIGGER series_points_cell_update
  AFTER UPDATE OF run_id, cell_id, status, latency_median_s ON cells BEGIN
  DELETE FROM series_points WHERE run_id = old.run_id AND cell_id = old.cell_id;
  INSERT OR REPLACE INTO series_points (run_id, cell_id, status, latency_median_s, min_psnr,
                                        mean_ssim, rel_l2)
    SELECT new.run_id, new.cell_id, new.status, new.latency_median_s, m.min_psnr,
           m.mean_ssim, m.rel_l2
    FROM (SELECT 1) LEFT JOIN metrics m ON m.cell_row = new.id;
END;
"""


def test_a_version_8_file_migrates_keeping_its_rows(tmp_path):
    db = tmp_path / "v8.db"
    r = run("db", "test-write", "--db", db, "--run-id", "old", "--cells", 3, "--finish")
    assert r.returncode == 0, r.stderr
    # Version 8 is the current version without what 8 -> 9 up to 11 -> 12 add (10: the
    # series_points column the two point-writing triggers fill, which had their version 3
    # text; 11: packed_points and its triggers; 12: two advice columns).
    with sqlite3.connect(db) as conn:
        conn.executescript("DROP VIEW device_verdicts; DROP TABLE qualifications; " + V3_POINT_TRIGGERS +
                           "PRAGMA user_version = 8;")
    check = run("db", "check", "--db", db)
    assert check.returncode == 0 and "schema version 8 (older" in check.stdout, check.stdout
    assert "qualifications" not in check.stdout
    r = run("db", "migrate", "--db", db)
    assert r.returncode == 0 and r.stdout.strip() == f"{db}: schema version 8 -> 12", r.stdout
    assert sql(db, "SELECT count(*) FROM cells WHERE run_id = 'old'") == [(3,)]
    assert sql(db, "SELECT count(*) FROM series_points p JOIN cells c ON c.id = p.cell_row") == [(3,)]
    check = run("db", "check", "--db", db)
    assert check.returncode == 0 and "schema version 12, journal wal" in check.stdout, check.stdout
    assert "  qualifications: 0" in check.stdout.splitlines()
    sql(db, "DROP VIEW device_verdicts")
    one_line_error(run("db", "check", "--db", db), "view device_verdicts missing")


def test_merge_carries_verdicts(tmp_path):
    a, b, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "out.db"
    qualify_run(a, "qa", "2024-05-01T03:00:00Z", {"cpu:avx512": ("PASS", [])})
    qualify_run(b, "qb", "2024-05-02T03:00:00Z", {"cpu:avx512": ("FAULTY", FAULTY_REASONS)})
    r = run("merge", out, a, b)
    assert r.returncode == 0, r.stderr
    assert "2 qualifications added, 0 conflicts" in r.stdout, r.stdout
    j = json.loads(run("history", "--qualification", "--device", "cpu:avx512", "--db", out, "--json", "-").stdout)
    assert [v["verdict"] for v in j["verdicts"]] == ["PASS", "FAULTY"]
    again = run("merge", out, a, b)
    assert again.returncode == 0 and "0 qualifications added" in again.stdout, again.stdout
