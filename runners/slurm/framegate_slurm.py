#!/usr/bin/python3
"""Runs a framegate matrix on a Slurm cluster as one job array, then gates on the result.

    runners/slurm/framegate_slurm.py MATRIX --shards N --out DIR [options] [-- run options]

1. submits runners/slurm/framegate-shard.sbatch as `sbatch --array=1-N` (array task i runs
   `framegate run MATRIX --shard i/N --db DIR/shard-i.db ...`), with `--gres=gpu:1` when the
   matrix has GPU cells (--gres auto, the default);
2. waits for every task (squeue), printing progress; Ctrl-C or SIGTERM cancels the array;
3. merges the shard databases into DIR/merged.db with `framegate merge`;
4. writes the reports of each shard's run from the merged database (DIR/report/);
5. exits with the gate's code: 0 every cell passed (PASS, XFAIL, UNSUPPORTED), 1 some cell
   failed, 2 a shard did not run to completion or exited 2 (harness error), sbatch
   failed, or the merge reported a conflict; 130 interrupted.

DIR must be on a file system every node sees. With --collect, steps 1-2 are skipped: the
CI pipelines in ci/ run the shards as CI jobs and use this to merge, report and gate.
Standard library only (/usr/bin/python3).
"""
import argparse
import json
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import time

SCRIPT = pathlib.Path(__file__).resolve().parent / "framegate-shard.sbatch"
PASSING = ("PASS", "XFAIL", "UNSUPPORTED")  # harness/cell_status.h: the non-failures
EXIT_OK, EXIT_FAILED, EXIT_HARNESS, EXIT_INTERRUPTED = 0, 1, 2, 130


class HarnessError(Exception):
    """Stops the orchestrator with exit 2 and a one-line message."""


class Interrupted(Exception):
    pass


def parse_args(argv):
    run_args = []
    if "--" in argv:
        cut = argv.index("--")
        argv, run_args = argv[:cut], argv[cut + 1:]
    p = argparse.ArgumentParser(
        prog="framegate_slurm.py", description=__doc__.split("\n\n")[0],
        epilog="Options after `--` go to every shard's `framegate run` (e.g. -- --golden-dir "
               "golden --timeout 600 --tags nightly). Exit: 0 pass, 1 a cell failed, "
               "2 harness error, 130 interrupted.")
    p.add_argument("matrix", help="matrix file or shipped name (smoke, local, nightly, qualification)")
    p.add_argument("--shards", type=int, required=True, help="number of array tasks (shards 1..N)")
    p.add_argument("--out", required=True, help="output folder, shared by every node; must not hold a run")
    p.add_argument("--framegate", default=os.environ.get("FRAMEGATE_BIN", "framegate"),
                   help="framegate binary, here and on the nodes (default $FRAMEGATE_BIN or PATH)")
    p.add_argument("--gres", default="auto",
                   help="auto (gpu:1 when a cell runs on a GPU), none, or a --gres value such as gpu:a100:1")
    p.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                   help="extra sbatch option, repeatable (e.g. --sbatch-arg=--partition=gpu)")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between squeue polls (default 5)")
    p.add_argument("--max-wait", type=float, default=0,
                   help="cancel the array and exit 2 after this many seconds (default: no limit)")
    p.add_argument("--no-report", action="store_true", help="skip `framegate report`")
    p.add_argument("--collect", action="store_true",
                   help="submit nothing: merge, report and gate the shard-i.{db,rc} files already "
                        "in --out (written by CI jobs, or by an array whose orchestrator was lost)")
    p.add_argument("--dry-run", action="store_true", help="print the sbatch command and exit")
    args = p.parse_args(argv)
    if not 1 <= args.shards <= 10000:
        p.error(f"--shards {args.shards}: must be 1..10000")
    args.run_args = run_args
    return args


def log(message):
    print(f"framegate-slurm: {message}", file=sys.stderr, flush=True)


def run(cmd, **kwargs):
    """Runs cmd, returns CompletedProcess (text); a missing program is a HarnessError."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    except FileNotFoundError:
        raise HarnessError(f"{cmd[0]}: command not found")


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else "(no output)"


def resolve_paths(args):
    args.out = pathlib.Path(args.out).resolve()
    if os.sep in args.framegate:
        args.framegate = str(pathlib.Path(args.framegate).resolve())
    if pathlib.Path(args.matrix).exists():  # else a shipped name, resolved by framegate
        args.matrix = str(pathlib.Path(args.matrix).resolve())


def gres_for(args):
    """The --gres value to submit with, or None. auto asks `framegate list` for the cells."""
    if args.gres == "none":
        return None
    if args.gres != "auto":
        return args.gres
    listed = run([args.framegate, "list", args.matrix, "--json", "-"])
    if listed.returncode != 0:
        raise HarnessError(last_line(listed.stderr or listed.stdout))
    cells = json.loads(listed.stdout)["cells"]
    return "gpu:1" if any(c["device"].startswith("cuda") for c in cells) else None


def prepare_out(out):
    if out.exists() and (any(out.glob("shard-*")) or (out / "merged.db").exists()):
        raise HarnessError(f"{out}: already holds a run (shard-* or merged.db); use a new folder")
    (out / "slurm").mkdir(parents=True, exist_ok=True)


def sbatch_command(args, gres):
    cmd = ["sbatch", "--parsable", f"--array=1-{args.shards}",
           f"--job-name=framegate-{pathlib.Path(args.matrix).stem}",
           f"--output={args.out}/slurm/shard-%a.out",
           f"--export=ALL,FRAMEGATE_BIN={args.framegate}"]
    if gres:
        cmd.append(f"--gres={gres}")
    cmd += args.sbatch_arg
    return cmd + [str(SCRIPT), str(args.out), args.matrix, str(args.shards)] + args.run_args


def submit(cmd):
    done = run(cmd)
    if done.returncode != 0:
        raise HarnessError(f"sbatch failed: {last_line(done.stderr)}")
    return done.stdout.strip().split(";")[0]  # --parsable: "jobid" or "jobid;cluster"


def task_states(job):
    """{array task id: state} of the job's tasks still known to squeue; {} once all ended."""
    q = run(["squeue", "-h", "-r", "-j", job, "-o", "%K %T"])
    if q.returncode != 0:
        if "Invalid job id" in q.stderr:  # purged after MinJobAge: every task ended
            return {}
        raise HarnessError(f"squeue failed: {last_line(q.stderr)}")
    states = {}
    for line in q.stdout.split("\n"):
        if line.strip():
            task, state = line.split()
            states[task] = state
    return states


def wait(job, args):
    start, last = time.monotonic(), None
    squeue_errors = 0
    while True:
        try:
            states = task_states(job)
            squeue_errors = 0
        except HarnessError:
            squeue_errors += 1  # slurmctld busy or restarting: retry for a while
            if squeue_errors >= 10:
                raise
            time.sleep(args.poll)
            continue
        if not states:
            return
        counts = {}
        for state in states.values():
            counts[state] = counts.get(state, 0) + 1
        summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
        if summary != last:
            log(f"job {job} [{time.monotonic() - start:.0f}s]: {summary}")
            last = summary
        if args.max_wait and time.monotonic() - start > args.max_wait:
            cancel(job)
            raise HarnessError(f"job {job} still running after --max-wait {args.max_wait:g}s; cancelled")
        time.sleep(args.poll)


def cancel(job):
    run(["scancel", job])
    log(f"cancelled job {job}")


def runs_of(db):
    """[(run_id, state)] of a shard database (one run per `framegate run`)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return conn.execute("SELECT run_id, state FROM runs ORDER BY started_at").fetchall()
    except sqlite3.Error as e:
        raise HarnessError(f"{db}: not a framegate database ({e})")


def read_exit_code(path):
    """The shard's framegate exit code, or None when the task never wrote it."""
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def collect_shards(args):
    """[(shard index, exit code or None, db path or None)], and the problems to report."""
    shards, problems = [], []
    for i in range(1, args.shards + 1):
        rc = read_exit_code(args.out / f"shard-{i}.rc")
        db = args.out / f"shard-{i}.db"
        db = db if db.exists() else None
        if rc is None:
            problems.append(f"shard {i}/{args.shards} did not finish (no shard-{i}.rc): "
                            f"see {args.out}/slurm/shard-{i}.out")
        elif rc not in (EXIT_OK, EXIT_FAILED):
            problems.append(f"shard {i}/{args.shards} exited {rc}: see {args.out}/slurm/shard-{i}.out")
        shards.append((i, rc, db))
    return shards, problems


def merge(args, dbs):
    merged = args.out / "merged.db"
    done = run([args.framegate, "merge", str(merged)] + [str(db) for db in dbs])
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise HarnessError(f"framegate merge exited {done.returncode}: {last_line(done.stderr or done.stdout)}")
    return merged


def cells_of(merged, run_ids):
    """[(run_id, cell_id, status, reason, repro)] of the given runs in the merged database."""
    marks = ",".join("?" * len(run_ids))
    with sqlite3.connect(f"file:{merged}?mode=ro", uri=True) as conn:
        return conn.execute(f"SELECT run_id, cell_id, status, reason, repro FROM cells "
                            f"WHERE run_id IN ({marks}) ORDER BY run_id, id", run_ids).fetchall()


def write_reports(args, merged, shard_runs):
    """framegate report for each shard's run, into DIR/report/shard-i/. Returns problems."""
    problems = []
    for i, run_id in shard_runs:
        folder = args.out / "report" / f"shard-{i}"
        folder.mkdir(parents=True, exist_ok=True)
        done = run([args.framegate, "report", run_id, "--db", str(merged), "--html", str(folder),
                    "--junit", str(folder / "junit.xml"), "--json", str(folder / "report.json")])
        if done.returncode not in (EXIT_OK, EXIT_FAILED):
            problems.append(f"framegate report {run_id} exited {done.returncode}: "
                            f"{last_line(done.stderr or done.stdout)}")
    return problems


def gate(args):
    """Collects, merges, reports; prints the summary and returns the exit code."""
    shards, problems = collect_shards(args)
    dbs = [db for _, _, db in shards if db]
    shard_runs = []
    for i, _, db in shards:
        for run_id, state in runs_of(db) if db else []:
            shard_runs.append((i, run_id))
            if state != "finished":
                problems.append(f"shard {i}/{args.shards}: run {run_id} is {state}")
    cells = []
    if dbs:
        merged = merge(args, dbs)
        cells = cells_of(merged, [r for _, r in shard_runs])
        if not args.no_report:
            problems += write_reports(args, merged, shard_runs)
    per_run = {}
    for run_id, _, status, _, _ in cells:
        total, failing = per_run.get(run_id, (0, 0))
        per_run[run_id] = (total + 1, failing + (status not in PASSING))
    for i, rc, db in shards:
        counts = [per_run.get(r, (0, 0)) for s, r in shard_runs if s == i]
        total, failing = sum(c[0] for c in counts), sum(c[1] for c in counts)
        state = "did not finish" if rc is None else f"exit {rc}"
        print(f"shard {i}/{args.shards}: {state}, {total} cells, {failing} failing")
    failing = [c for c in cells if c[2] not in PASSING]
    for run_id, cell_id, status, reason, repro in failing:
        print(f"{status} {cell_id} (run {run_id}): {reason or ''}".rstrip())
        if repro:
            print(f"  reproduce: {repro}")
    for problem in problems:
        print(f"error: {problem}")
    code = EXIT_HARNESS if problems else EXIT_FAILED if failing or any(
        rc == EXIT_FAILED for _, rc, _ in shards) else EXIT_OK
    where = f" in {args.out / 'merged.db'}" if dbs else ""
    print(f"gate: {len(cells)} cells{where}, {len(failing)} failing, "
          f"{len(problems)} harness problems -> exit {code}")
    return code


def on_sigterm(signum, frame):
    raise Interrupted()


def main(argv):
    args = parse_args(argv)
    resolve_paths(args)
    signal.signal(signal.SIGTERM, on_sigterm)
    job = None
    try:
        if args.collect:
            if not args.out.is_dir():
                raise HarnessError(f"{args.out}: no such folder (--collect reads the shard files there)")
            return gate(args)
        cmd = sbatch_command(args, gres_for(args))
        if args.dry_run:
            print(" ".join(cmd))
            return EXIT_OK
        prepare_out(args.out)
        job = submit(cmd)
        print(f"job {job}: {args.shards} shards of {args.matrix} -> {args.out}", flush=True)
        wait(job, args)
        job = None
        return gate(args)
    except HarnessError as e:
        print(f"framegate-slurm: error: {e}", file=sys.stderr)
        return EXIT_HARNESS
    except (KeyboardInterrupt, Interrupted):
        if job:
            cancel(job)
        log("interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
