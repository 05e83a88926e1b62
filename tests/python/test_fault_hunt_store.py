"""Damaged and hand-made store files through the real `framegate` binary (issue 21's fault
hunt): a merge input holding two results for one cell, a negative schema version, a file
missing a table, column, index or trigger, rows whose parent row was deleted, a truncated
file. Each must be ONE stderr line "framegate: error: <file>: ..." with exit 2 (never a
crash, never a wrong "ok"), and leave every file as it was.

Files are made with Python's sqlite3 (the real SQLite) from what `framegate db test-write`
(hidden, test-only: synthetic cells through the real store) writes.
"""
import hashlib
import os
import pathlib
import sqlite3
import subprocess

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")


def run(*args, cwd=None, timeout=120):
    return subprocess.run([FRAMEGATE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


def one_line_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("framegate: error: ") and r.stderr.count("\n") == 1, r.stderr
    for fragment in fragments:
        assert str(fragment) in r.stderr, (fragment, r.stderr)


def write(db, run_id, cells=3):
    r = run("db", "test-write", "--db", db, "--run-id", run_id, "--cells", cells, "--finish")
    assert r.returncode == 0, r.stderr


def sql(db, statement, *params):
    conn = sqlite3.connect(db)
    try:
        with conn:
            return conn.execute(statement, params).fetchall()
    finally:
        conn.close()


def script(db, text):
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.executescript(text)
    finally:
        conn.close()


def files(d):
    """Every file under d with its bytes: to see that a refused command changed nothing.
    SQLite's -shm index and an empty -wal (which a read-only connection to a WAL file may
    leave) hold no data and are left out."""
    return {p.name: p.read_bytes() for p in sorted(pathlib.Path(d).iterdir())
            if p.is_file() and not p.name.endswith("-shm") and not (p.name.endswith("-wal") and p.stat().st_size == 0)}


def rewrite_table(db, table, old, new):
    """Rebuilds `table` from its own CREATE statement with `old` replaced by `new`, keeping
    its rows, indexes and triggers: a hand-made or badly repaired file."""
    create = sql(db, "SELECT sql FROM sqlite_master WHERE name = ?", table)[0][0]
    assert old in create, create
    create = create.replace(old, new, 1).replace(table, table + "_new", 1)
    attached = [r[0] for r in sql(db, "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN "
                                      "('index', 'trigger') AND sql IS NOT NULL", table)]
    script(db, f"""PRAGMA foreign_keys = OFF; PRAGMA legacy_alter_table = ON; BEGIN;
        {create}; INSERT INTO {table}_new SELECT * FROM {table}; DROP TABLE {table};
        ALTER TABLE {table}_new RENAME TO {table}; {';'.join(attached)}; COMMIT;""")


def cell_id(policy, size="tiny", device="cpu", seed=0):
    canonical = (f"v1|pipeline=reference:{size}|device={device}|policy={policy}|seed={seed}"
                 "|fault=|sampler=|steps=0|guidance=0")
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# ---- merge: one input, one run, two results for one cell id --------------------------------

# Schema version 1 as its code wrote it (store/schema.cc): the cell id was stored as given and
# UNIQUE (run_id, cell_id) held, but sampler and steps, which the id hashed, were not kept.
# Two cells that differed only there migrate to one identity, so one Cell::Id().
V1_TWINS = """
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
INSERT INTO cells VALUES (1, 'old', 'aaaa000011112222', 'reference:tiny', 'cpu', 'fp16', 0, '',
  'FAIL', 'min_psnr 12 < 30', '[0.5]');
INSERT INTO cells VALUES (2, 'old', 'bbbb000011112222', 'reference:tiny', 'cpu', 'fp16', 0, '',
  'PASS', '', '[0.5]');
PRAGMA user_version = 1;
"""


def test_merge_refuses_an_older_schema_input_whose_run_holds_one_cell_twice(tmp_path):
    good, twins, out = tmp_path / "good.db", tmp_path / "twins.db", tmp_path / "out.db"
    write(good, "r1")
    script(twins, V1_TWINS)
    twins_bytes = twins.read_bytes()
    twin = cell_id("fp16")
    r = run("merge", out, good, twins)  # before the fix: "0 conflicts", the FAIL became a PASS
    one_line_error(r, twins, "run old", f"cell {twin} (reference:tiny cpu fp16 seed=0) is stored twice (FAIL and PASS)",
                   "nothing was merged")
    assert not out.exists()  # every input is checked before the output is created
    write(out, "r0")
    before = files(tmp_path)
    one_line_error(run("merge", out, good, twins), twins, twin)
    assert files(tmp_path) == before  # neither the output nor an input changed
    assert twins.read_bytes() == twins_bytes and sql(twins, "PRAGMA user_version") == [(1,)]


def test_merge_refuses_a_hand_made_input_without_the_unique_cell_constraint(tmp_path):
    hand, out = tmp_path / "hand.db", tmp_path / "out.db"
    write(hand, "r1")
    rewrite_table(hand, "cells", "UNIQUE (run_id, cell_id)", "CHECK (1)")
    columns = [r[1] for r in sql(hand, "PRAGMA table_info(cells)") if r[1] != "id"]
    sql(hand, f"INSERT INTO cells ({', '.join(columns)}) SELECT {', '.join(columns)} FROM cells WHERE id = 1")
    sql(hand, "UPDATE cells SET status = 'FAIL', reason = 'min_psnr 12 < 30' WHERE id = 1")
    twin = sql(hand, "SELECT cell_id FROM cells WHERE id = 1")[0][0]
    assert sql(hand, "SELECT count(*) FROM cells WHERE cell_id = ?", twin) == [(2,)]
    write(out, "r0")
    before = files(tmp_path)
    one_line_error(run("merge", out, hand), hand, "run r1", f"cell {twin}", "stored twice (FAIL and PASS)")
    assert files(tmp_path) == before


def test_merge_refuses_an_input_whose_cells_lost_their_parent_rows(tmp_path):
    orphan, out = tmp_path / "orphan.db", tmp_path / "out.db"
    write(orphan, "r1")
    lost = sql(orphan, "SELECT cell_id FROM cells ORDER BY id LIMIT 1")[0][0]
    sql(orphan, "DELETE FROM cell_specs WHERE cell_id = ?", lost)  # sqlite3 enforces no foreign key
    write(out, "r0")
    before = files(tmp_path)
    # before the fix: exit 0, "2 cells added, 0 conflicts": the third result silently dropped
    one_line_error(run("merge", out, orphan), orphan, "cells: 1 row refers to a missing cell_specs row",
                   "nothing was merged")
    assert files(tmp_path) == before
    one_line_error(run("db", "check", "--db", orphan), orphan, "dangling references",
                   "cells: 1 row refers to a missing cell_specs row")


# ---- schema version: negative ---------------------------------------------------------------

STORE_COMMANDS = [
    ["history", "0123456789abcdef"], ["regressions"], ["compare", "r1", "r1"], ["db", "check"],
    ["db", "migrate"], ["report", "latest"], ["db", "test-write", "--run-id", "r2"],
    ["run", "--size", "tiny", "--policy", "fp32", "--steps", "2", "--threads", "1"],
]


@pytest.mark.parametrize("version", [-1, -2147483648])
def test_a_negative_schema_version_is_one_line_for_every_store_command(tmp_path, version):
    db = tmp_path / "neg.db"
    write(db, "r1")
    sql(db, f"PRAGMA user_version = {version}")
    before = files(tmp_path)
    for command in STORE_COMMANDS:  # before the fix: SIGSEGV (rc 139), and `db check` said ok
        one_line_error(run(*command, "--db", db, cwd=tmp_path), db,
                       f"schema version {version} is not a framegate schema version")
    out = tmp_path / "out" / "merged.db"
    out.parent.mkdir()
    one_line_error(run("merge", out, db), db, f"schema version {version}")
    assert not out.exists()
    assert files(tmp_path) == before


# ---- db check (and every writer) verifies the schema ----------------------------------------

def test_db_check_names_every_missing_table_index_and_trigger(tmp_path):
    db = tmp_path / "damaged.db"
    write(db, "r1")
    script(db, "DROP TABLE runs; DROP TRIGGER series_points_cell_insert")
    r = run("db", "check", "--db", db)  # before the fix: "integrity ok"
    one_line_error(r, db, "is damaged: table runs missing; index runs_by_start missing; "
                          "trigger series_points_cell_insert missing (3 problems")
    assert r.stdout == ""


def test_db_check_names_a_wrong_column_type_and_a_missing_constraint(tmp_path):
    db = tmp_path / "types.db"
    write(db, "r1")
    rewrite_table(db, "cells", "cell_id TEXT NOT NULL", "cell_id INTEGER NOT NULL")
    rewrite_table(db, "cells", "UNIQUE (run_id, cell_id)", "CHECK (1)")
    script(db, "DROP INDEX cells_by_cell_id; CREATE INDEX cells_by_cell_id ON cells (run_id)")
    one_line_error(run("db", "check", "--db", db), db,
                   "column cells.cell_id is INTEGER NOT NULL, expected TEXT NOT NULL",
                   "UNIQUE (run_id, cell_id) on cells missing",
                   "index cells_by_cell_id is (run_id), expected (cell_id)")


def test_writers_and_migrate_refuse_a_damaged_schema_and_change_nothing(tmp_path):
    db = tmp_path / "nounique.db"
    write(db, "r1")
    rewrite_table(db, "cells", "UNIQUE (run_id, cell_id)", "CHECK (1)")
    sql(db, "PRAGMA journal_mode = DELETE")
    before = files(tmp_path)
    # before the fix: test-write re-recorded the run's cells as duplicates, migrate said
    # "already current"
    for command in (["db", "test-write", "--run-id", "r1", "--cells", "4"], ["db", "migrate"],
                    ["history", "0123456789abcdef"], ["regressions"]):
        one_line_error(run(*command, "--db", db), db, "UNIQUE (run_id, cell_id) on cells missing")
    assert files(tmp_path) == before
    sql(db, "DROP TABLE runs")
    one_line_error(run("db", "migrate", "--db", db), db, "table runs missing")


def test_a_sound_file_with_a_users_own_table_still_checks_ok(tmp_path):
    db = tmp_path / "mine.db"
    write(db, "r1")
    script(db, "CREATE TABLE my_notes (text TEXT); CREATE INDEX my_status ON cells (status)")
    r = run("db", "check", "--db", db)
    assert r.returncode == 0 and "integrity ok" in r.stdout and "  my_notes: 0\n" in r.stdout, r.stderr
    write(db, "r2")


# ---- damaged files: never a crash, never an ok ----------------------------------------------

def test_a_truncated_file_is_one_line_for_every_store_command(tmp_path):
    db = tmp_path / "cut.db"
    write(db, "r1", cells=40)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    before = files(tmp_path)
    for command in STORE_COMMANDS:
        one_line_error(run(*command, "--db", db, cwd=tmp_path), db)
    one_line_error(run("merge", tmp_path / "out.db", db), db)
    assert files(tmp_path) == before


def test_a_fifo_or_a_folder_as_the_database_is_one_line_not_a_hang(tmp_path):
    fifo, folder, good = tmp_path / "fifo.db", tmp_path / "folder.db", tmp_path / "good.db"
    os.mkfifo(fifo)
    folder.mkdir()
    write(good, "r1")
    before = files(tmp_path)
    for db in (fifo, folder):
        # before the fix: `db check` on a FIFO blocked in open() for ever
        for command in STORE_COMMANDS:
            one_line_error(run(*command, "--db", db, cwd=tmp_path, timeout=60), db, "not a regular file")
        one_line_error(run("merge", tmp_path / "out.db", db, timeout=60), db, "not a regular file")
        one_line_error(run("merge", db, good, timeout=60), db, "not a regular file")
    assert files(tmp_path) == before
