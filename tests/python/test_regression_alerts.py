"""`framegate regressions` as a nightly CI gates on it: --json alerts with their kind
(regression, improvement, environment, flaky), exit 1 only for a confirmed regression, the
environment fingerprint, and re-baselining with --accept (issue 24). Real SQLite files
written by `framegate db test-write`, edited through the documented schema."""
import json
import os
import sqlite3
import subprocess

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")


def run(*args):
    return subprocess.run([FRAMEGATE, *map(str, args)], capture_output=True, text=True)


def sql(db, statement, *params):
    with sqlite3.connect(db) as conn:
        return conn.execute(statement, params).fetchall()


def one_line_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("framegate: error: ") and r.stderr.count("\n") == 1, r.stderr
    for fragment in fragments:
        assert fragment in r.stderr, r.stderr


def history(tmp_path, nights=10):
    """`nights` runs of 3 cells one day apart; returns (db, the first cell's id)."""
    db = tmp_path / "alerts.db"
    for night in range(nights):
        r = run("db", "test-write", "--db", db, "--run-id", f"night-{night}", "--cells", 3, "--finish")
        assert r.returncode == 0, r.stderr
        sql(db, "UPDATE runs SET started_at = ?, git_sha = ? WHERE run_id = ?",
            f"2024-05-{night + 1:02d}T03:00:00Z", f"sha{night}", f"night-{night}")
    cell = sql(db, "SELECT cell_id FROM cells WHERE run_id = 'night-0' ORDER BY id")[0][0]
    return db, cell


def slower(db, cell, first_night, factor=1.3):
    sql(db, "UPDATE cells SET latency_median_s = latency_median_s * ? WHERE cell_id = ? AND "
        "CAST(substr(run_id, 7) AS INTEGER) >= ?", factor, cell, first_night)


def latency_alerts(report):
    return [a for a in report["alerts"] if a["track"] == "latency_median_s"]


def test_a_confirmed_regression_is_exit_1_with_its_alert_in_json(tmp_path):
    db, cell = history(tmp_path)
    slower(db, cell, 9)  # one night: pending, exit 0
    once = run("regressions", "--db", db, "--json", "-")
    assert once.returncode == 0, once.stdout + once.stderr
    assert all(not a["confirmed"] for a in json.loads(once.stdout)["alerts"])
    slower(db, cell, 8)  # two nights: not yet confirmed (3 nights for a latency change)
    assert run("regressions", "--db", db).returncode == 0
    assert run("regressions", "--db", db, "--confirm", "2").returncode == 1
    slower(db, cell, 7)  # nights 7, 8, 9 (night 9 now 2.2x: still above the old level)
    twice = run("regressions", "--db", db, "--json", "-")
    assert twice.returncode == 1, twice.stdout + twice.stderr
    [alert] = latency_alerts(json.loads(twice.stdout))
    assert alert["kind"] == "regression" and alert["confirmed"] and alert["cell_id"] == cell
    assert alert["series"]["cell_id"] == cell and alert["nights"]["since_run"] == "night-7"
    assert alert["nights"]["count"] == 3 and alert["magnitude"]["relative"] > 0.3
    assert alert["confidence"] > 0.99


def test_a_change_with_the_environment_is_labelled_environment_and_exit_0(tmp_path):
    db, cell = history(tmp_path)
    slower(db, cell, 7)
    sql(db, "UPDATE runs SET libtorch_version = '2.6.0', fingerprint = '{\"cpu_isa\": \"avx2\"}' "
        "WHERE CAST(substr(run_id, 7) AS INTEGER) >= 7")
    r = run("regressions", "--db", db, "--json", "-")
    assert r.returncode == 0, r.stdout + r.stderr
    [alert] = latency_alerts(json.loads(r.stdout))
    assert alert["kind"] == "environment", alert
    assert alert["changed"] == ["cpu_isa: (none) -> avx2", "libtorch_version: 1.13.0 -> 2.6.0"]
    text = run("regressions", "--db", db)
    assert "environment changed at night-7" in text.stdout and "libtorch_version: 1.13.0 -> 2.6.0" in text.stdout


def test_accept_records_who_when_why_and_rebaselines(tmp_path):
    db, cell = history(tmp_path)
    slower(db, cell, 7)
    assert run("regressions", "--db", db).returncode == 1
    r = run("regressions", "--db", db, "--accept", cell, "--since", "night-7", "--reason", "new kernel, exact",
            "--by", "bob")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"accepted cell {cell} from run night-7" in r.stdout and "bob" in r.stdout
    [(cell_id, since, by, reason, at)] = sql(
        db, "SELECT cell_id, since_run, accepted_by, reason, accepted_at FROM accepted_changes")
    assert (cell_id, since, by, reason) == (cell, "night-7", "bob", "new kernel, exact") and at.endswith("Z")
    after = run("regressions", "--db", db, "--json", "-")
    assert after.returncode == 0, after.stdout
    assert json.loads(after.stdout)["accepted_series"] == 1
    # --all: every cell from a run on.
    r = run("regressions", "--db", db, "--all", "--since", "night-8", "--reason", "new driver")
    assert r.returncode == 0 and "accepted every cell from run night-8" in r.stdout
    assert sql(db, "SELECT cell_id FROM accepted_changes ORDER BY id")[-1] == ("*",)


def test_accept_bad_input_stores_nothing(tmp_path):
    db, cell = history(tmp_path, nights=2)
    one_line_error(run("regressions", "--db", db, "--accept", cell, "--reason", "x"), "needs --since RUN")
    one_line_error(run("regressions", "--db", db, "--accept", cell, "--since", "night-9", "--reason", "x"),
                   "'night-9' is not a run id", str(db))
    one_line_error(run("regressions", "--db", db, "--accept", "0000", "--since", "night-1", "--reason", "x"),
                   "'0000' is not a cell id")
    one_line_error(run("regressions", "--db", db, "--accept", cell, "--since", "night-1"), "needs a --reason")
    assert sql(db, "SELECT count(*) FROM accepted_changes") == [(0,)]


def test_test_import_records_a_run_json_through_the_store(tmp_path):
    # bench/alert_quality.py builds its histories this way: run.json in, the same run out.
    db, _ = history(tmp_path, nights=1)
    exported = tmp_path / "run.json"
    r = run("report", "night-0", "--db", db, "--json", exported)
    assert r.returncode == 0, r.stderr
    copy = tmp_path / "copy.db"
    r = run("db", "test-import", "--db", copy, exported)
    assert r.returncode == 0 and "imported 1 run" in r.stdout, r.stderr
    columns = "run_id, cell_id, status, latency_median_s"
    assert sql(copy, f"SELECT {columns} FROM cells ORDER BY cell_id") == \
        sql(db, f"SELECT {columns} FROM cells ORDER BY cell_id")
    assert sql(copy, "SELECT state FROM runs") == [("finished",)]
    one_line_error(run("db", "test-import", "--db", copy, tmp_path / "missing.json"), "missing.json")
