"""The matrix runner's processes and scratch folders under the faults a fault hunt found
(issue 21): scratch folders named by cell id and attempt only, a missing TMPDIR as a
one-line error, stale scratch folders of killed runners removed at the next start, a
worker that dies while idle not blamed on the next cell, a fallback cycle that ends.
Real `framegate run` processes, a real SQLite file; every wait polls a state the runner
reaches for certain (a hanging cell keeps it there), never a sleep that hopes."""
import json
import os
import pathlib
import re
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
    subprocess.run([FRAMEGATE, "golden", "make", *FAST, "--golden-dir", str(d)], check=True,
                   capture_output=True, timeout=300)
    return d


def env_with(tmpdir, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRAMEGATE_TEST_")}
    env["TMPDIR"] = str(tmpdir)
    env.update(extra)
    return env


def run(cwd, *args, env, timeout=300):
    return subprocess.run([FRAMEGATE, "run", *map(str, args)], capture_output=True, text=True,
                          errors="surrogateescape", cwd=cwd, env=env, timeout=timeout)


def run_states(db):
    with sqlite3.connect(db) as c:
        return [row[0] for row in c.execute("SELECT state FROM runs")]


def scratch_folders(tmpdir):
    return sorted(p.name for p in pathlib.Path(tmpdir).glob("framegate-run-*"))


def wait_for(what, predicate, deadline_s=120):
    """Polls `predicate` until it holds; fails naming `what` after `deadline_s` (a bound, not
    a race: the runner reaches the state for certain)."""
    end = time.time() + deadline_s
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def start_hanging_run(cwd, tmpdir):
    """A `framegate run` whose only cell hangs (test hook) until it is killed; returns the
    process and its scratch folder once the cell's folder in it exists."""
    before = set(scratch_folders(tmpdir))
    p = subprocess.Popen([FRAMEGATE, "run", *FAST, "--policy", "bf16", "--db", cwd / "hang.db"],
                         cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=env_with(tmpdir, FRAMEGATE_TEST_CELL_FAULTS="bf16:hang"))

    def started():
        for name in set(scratch_folders(tmpdir)) - before:
            folder = pathlib.Path(tmpdir) / name
            if any((d / "cell.json").exists() for d in folder.iterdir() if d.is_dir()):
                return folder
        return None

    return p, wait_for("the hanging run's cell folder", started)


def test_scratch_folders_are_named_by_cell_id_and_attempt(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    p, folder = start_hanging_run(tmp_path, tmpdir)
    try:
        cells = [d.name for d in folder.iterdir() if d.is_dir()]
        assert len(cells) == 1 and re.fullmatch(r"[0-9a-f]{16}-1", cells[0]), cells
    finally:
        p.kill()
        p.wait()


def test_a_policy_name_cannot_lead_the_cell_files_out_of_the_scratch_folder(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    victim = tmp_path / "victim"
    policies = tmp_path / "policies.toml"
    policies.write_text('[policy."/../../../victim"]\nbased_on = "fp32"\n')
    run(tmp_path, *FAST, "--policy-file", policies, "--policy", "/../../../victim", "--db",
        tmp_path / "v.db", env=env_with(tmpdir))
    assert not victim.exists(), sorted(str(p) for p in victim.rglob("*"))
    assert scratch_folders(tmpdir) == []


def test_missing_tmpdir_is_a_one_line_error_and_the_run_is_not_left_running(tmp_path):
    db = tmp_path / "t.db"
    r = run(tmp_path, *FAST, "--policy", "fp32", "--db", db, env=env_with("/nonexistent/tmp"))
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("framegate: error: /nonexistent/tmp/framegate-run-"), lines[0]
    assert "No such file or directory" in lines[0], lines[0]
    assert run_states(db) == ["interrupted"]


def test_a_tmpdir_that_is_not_utf8_is_a_one_line_error_not_an_abort(tmp_path):
    tmpdir = os.fsencode(tmp_path) + b"/tmp\xff"
    os.mkdir(tmpdir)
    db = tmp_path / "t.db"
    r = run(tmp_path, *FAST, "--policy", "fp32", "--db", db, env=env_with(os.fsdecode(tmpdir)))
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.splitlines()) == 1 and "not UTF-8" in r.stderr, r.stderr
    assert run_states(db) == ["interrupted"]
    assert os.listdir(tmpdir) == []


def test_stale_scratch_folders_go_and_a_live_runners_folder_stays(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    killed, stale = start_hanging_run(tmp_path, tmpdir)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert stale.exists()
    live, kept = start_hanging_run(tmp_path, tmpdir)
    try:
        assert not stale.exists(), "the next runner should remove the killed runner's folder"
        # A third run while the second lives, on a cell that crashes at once (no golden).
        r = run(tmp_path, *FAST, "--policy", "fp32", "--db", tmp_path / "third.db",
                env=env_with(tmpdir, FRAMEGATE_TEST_CELL_FAULTS="fp32:segv"))
        assert r.returncode == 1, r.stdout + r.stderr
        assert kept.exists(), "a live runner's scratch folder must be kept"
        assert scratch_folders(tmpdir) == [kept.name]
    finally:
        live.send_signal(signal.SIGINT)
        live.wait(timeout=60)
    assert scratch_folders(tmpdir) == []


def cells_of(out):
    return json.loads(out.read_text())["cells"]


def test_a_worker_that_dies_idle_is_not_blamed_on_the_next_cell(tmp_path, goldens):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = tmp_path / "run.json"
    # Each worker exits when it reads its second request, before taking it.
    r = run(tmp_path, *FAST, "--policy", "fp32,bf16,fp8e5m2-bf16", "--golden-dir", goldens,
            "--db", tmp_path / "w.db", "--json", out,
            env=env_with(tmpdir, FRAMEGATE_TEST_WORKER_EXIT_AT_REQUEST="2"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert [c["status"] for c in cells_of(out)] == ["PASS"] * 3, cells_of(out)
    with sqlite3.connect(tmp_path / "w.db") as c:
        assert c.execute("SELECT COUNT(*) FROM cells WHERE status='CRASH'").fetchone()[0] == 0


def test_a_cell_no_worker_takes_is_a_crash_that_says_so(tmp_path, goldens):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = tmp_path / "run.json"
    # Every worker exits when it reads its first request: the retry is bounded.
    r = run(tmp_path, *FAST, "--policy", "fp32", "--golden-dir", goldens, "--db", tmp_path / "w.db",
            "--json", out, env=env_with(tmpdir, FRAMEGATE_TEST_WORKER_EXIT_AT_REQUEST="1"))
    assert r.returncode == 1, r.stdout + r.stderr
    [cell] = cells_of(out)
    assert cell["status"] == "CRASH", cell
    assert "before it took the cell" in cell["reason"], cell["reason"]


def test_a_fallback_cycle_ends(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    policies = tmp_path / "loop.toml"
    policies.write_text('[policy.loop-a]\nbased_on = "fp16-emulated"\nfallback = "loop-b"\n'
                        '[policy.loop-b]\nbased_on = "fp16-emulated"\nfallback = "loop-a"\n')
    out = tmp_path / "run.json"
    r = run(tmp_path, *FAST, "--fault", "attn-overflow", "--policy-file", policies, "--policy",
            "loop-a", "--fallback", "--db", tmp_path / "f.db", "--json", out, env=env_with(tmpdir),
            timeout=240)
    if r.returncode == 2 and "loop" in r.stderr:
        pytest.skip("the policy parser refuses the cycle (the runner's guard: "
                    "MatrixRunnerTest.FallbackStopsWhenThePolicyChainRepeats)")
    assert r.returncode == 1, r.stdout + r.stderr
    [cell] = cells_of(out)
    assert cell["status"] == "NONFINITE", cell
    assert cell["reason"].startswith("fallback: loop-a NONFINITE"), cell["reason"]
    assert "-> loop-b NONFINITE" in cell["reason"], cell["reason"]
    assert "repeated" in cell["reason"], cell["reason"]
