#!/usr/bin/python3
"""Prints the nightly cost of issue 17 in one table, every figure a whole process.

1. `framegate run`'s harness overhead with persistent workers and with a process per cell:
   wall time of the whole `framegate run` / the compute the cells report, on a 12-cell
   matrix (tiny, cpu, fp32 bf16 fp16-emulated fp8e4m3-bf16 x seeds 0 1 2) and on the
   shipped smoke matrix, judged against the committed goldens; worker and process runs
   alternate (ABAB...) so that both see the same load.
2. `framegate metrics` against the scikit-image script of bench/metrics_vs_skimage.py on
   the same frames (its make_frames, 128 of 256x256 by default).
3. Store queries end to end (history, regressions, compare, db check) on a 5-run database
   of 20 cells a run (`framegate db test-write`).
4. `framegate generate --model` of the example package `clean` against the Python loop of
   pipelines/crosscheck/python_sampler.py (the same sampler, the same TorchScript modules
   on Debian's torch 1.13, the same frames), each a whole process, one thread each.

Every measurement alternates with its comparison in each repeat; the table gives medians
and minimums, the target next to each figure and whether the median meets it, and the
load average before and after. Run with Debian's Python (numpy, scikit-image, torch):
  /usr/bin/python3 bench/nightly_cost.py --build build --repeats 5
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import metrics_vs_skimage  # noqa: E402  (make_frames, SKIMAGE_SCRIPT)

PYTHON_LOOP = REPO / "pipelines" / "crosscheck" / "python_sampler.py"
TWELVE_CELLS = """name = "nightly-cost"
description = "bench/nightly_cost.py: tiny on the CPU, {n} cells"
timeout = 600

[axes]
pipelines = ["tiny"]
devices = ["cpu"]
policies = {policies}
seeds = {seeds}
"""
LEGEND = """
framegate / compared with: wall seconds of whole processes, median (min) over the repeats.
run rows: "compared with" is the cells' compute, the sum over the run's cells of the judged
run's generation as --json reports it (timings.step_seconds summed + timings.decode_seconds;
0 for a cell that ends ERROR before its first step); overhead = the `framegate run` wall /
that, per repeat. Everything else is overhead: LibTorch's start, workers or cell processes,
model builds, golden reads, judging, the localisation rerun of NONFINITE cells, the store.
figure: the median over the repeats of each repeat's figure (the best repeat's)."""


def whole_process(argv, cwd=None):
    """Wall seconds of one process, start to exit (output discarded); a failure stops here."""
    start = time.perf_counter()
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"harness error: {' '.join(map(str, argv))} exited {proc.returncode}:\n"
                 f"{proc.stderr[-2000:]}")
    return seconds


def alternate(jobs, repeats):
    """Runs each job (a function returning seconds) in turn, `repeats` rounds (ABAB...);
    returns {name: [seconds of each round]}."""
    times = {name: [] for name in jobs}
    for _ in range(repeats):
        for name, job in jobs.items():
            times[name].append(job())
    return times


def load():
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min), nproc {os.cpu_count()}"


def cell_compute(json_path):
    """Sum over cells of the judged run's generation: its step seconds + its decode."""
    cells = json.loads(pathlib.Path(json_path).read_text())["cells"]
    return sum(sum(c["timings"]["step_seconds"]) + c["timings"]["decode_seconds"]
               for c in cells)


class Table:
    def __init__(self):
        self.rows = []

    def add(self, what, ours, theirs, values, unit, target, at_most=True):
        """values: the per-repeat figure compared with `target` (<= when at_most, else >=;
        None: no target)."""
        median = statistics.median(values)
        best = min(values) if at_most else max(values)
        fmt = lambda xs: f"{statistics.median(xs):.3f} ({min(xs):.3f})" if xs else "-"
        goal, met = "-", "-"
        if target is not None:
            goal = f"{'<=' if at_most else '>='} {target}{unit}"
            met = "yes" if (median <= target if at_most else median >= target) else "NO"
        print(f"measured: {what}: {median:.2f}{unit}", file=sys.stderr, flush=True)
        self.rows.append(f"| {what} | {fmt(ours)} | {fmt(theirs)} | {median:.2f}{unit} "
                         f"({best:.2f}) | {goal} | {met} |")

    def print(self):
        print("| measurement | framegate s, median (min) | compared with s, median (min) | "
              "figure, median (best) | target | met |")
        print("|---|---:|---:|---:|---:|---|")
        print("\n".join(self.rows))


def run_overhead(table, framegate, matrix, label, tmp, repeats, threads, target):
    walls, computes = {}, {}

    def job(isolation):
        def once():
            db, out = tmp / f"{isolation}.db", tmp / f"{isolation}.json"
            db.unlink(missing_ok=True)
            wall = whole_process([framegate, "run", matrix, "--db", db, "--json", out,
                                  "--isolation", isolation, "--artifacts", tmp / "artifacts",
                                  *threads], cwd=tmp)
            computes.setdefault(isolation, []).append(cell_compute(out))
            return wall
        return once

    walls = alternate({"worker": job("worker"), "process": job("process")}, repeats)
    for isolation in ("worker", "process"):
        ratios = [w / c for w, c in zip(walls[isolation], computes[isolation])]
        table.add(f"`run {label}` --isolation {isolation}: overhead = run wall / cells' "
                  "compute", walls[isolation], computes[isolation], ratios, "",
                  target if isolation == "worker" else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", help="--threads of the `framegate run`s (default: "
                    "framegate's, every core)")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke test of this script: 1 repeat, a 2-cell matrix, no smoke "
                    "matrix, 16 metric frames, run with --threads 1")
    args = ap.parse_args()
    repeats = 1 if args.quick else args.repeats
    framegate = pathlib.Path(args.build).resolve() / "bin" / "framegate"
    if args.quick and not args.threads:
        args.threads = "1"  # two threads on a busy machine can take 10x longer
    threads = ["--threads", args.threads] if args.threads else []
    table = Table()
    print(f"before: {load()}; {repeats} repeats, build {args.build}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        # 1. Harness overhead.
        policies = ["fp32", "bf16"] if args.quick else ["fp32", "bf16", "fp16-emulated",
                                                         "fp8e4m3-bf16"]
        seeds = [0] if args.quick else [0, 1, 2]
        matrix = tmp / "cells.toml"
        matrix.write_text(TWELVE_CELLS.format(n=len(policies) * len(seeds),
                                              policies=json.dumps(policies), seeds=seeds))
        run_overhead(table, framegate, matrix, f"{len(policies) * len(seeds)} cells", tmp,
                     repeats, threads, 1.10)
        if not args.quick:
            run_overhead(table, framegate, "smoke", "smoke", tmp, repeats, threads, None)

        # 2. metrics against scikit-image.
        frames = 16 if args.quick else 128
        ref, cand = metrics_vs_skimage.make_frames(frames, 256, 256, seed=0)
        import numpy as np
        np.save(tmp / "ref.npy", ref)
        np.save(tmp / "cand.npy", cand)
        del ref, cand
        (tmp / "skimage_metrics.py").write_text(metrics_vs_skimage.SKIMAGE_SCRIPT)
        t = alternate({
            "framegate": lambda: whole_process([framegate, "metrics", tmp / "ref.npy",
                                                tmp / "cand.npy", "--json", tmp / "m.json"]),
            "skimage": lambda: whole_process([sys.executable, tmp / "skimage_metrics.py",
                                              tmp / "ref.npy", tmp / "cand.npy"]),
        }, repeats)
        table.add(f"`metrics`, {frames} frames of 256x256: speed-up = scikit-image script / "
                  "framegate", t["framegate"], t["skimage"],
                  [s / f for f, s in zip(t["framegate"], t["skimage"])], "x", 4, at_most=False)

        # 3. Store queries.
        db = tmp / "store.db"
        for run in range(1, 6):
            whole_process([framegate, "db", "test-write", "--db", db, "--run-id", f"run{run}",
                           "--cells", "20", "--finish"])
        for query in (["history", "--filter", "policy=fp32"], ["regressions"],
                      ["compare", "run1", "run5"], ["db", "check"]):
            # regressions/compare exit 1 on a regression: test-write's runs have none.
            t = alternate({"q": lambda: whole_process([framegate, *query, "--db", db])},
                          repeats)["q"]
            table.add(f"`{' '.join(query)}` on 5 runs x 20 cells: ms", t, [],
                      [s * 1000 for s in t], " ms", 50)

        # 4. generate of a TorchScript package against the Python loop.
        whole_process([sys.executable, REPO / "pipelines/examples/make_example_packages.py",
                       tmp / "pk", "--only", "clean"])
        package = tmp / "pk" / "clean"
        t = alternate({
            "framegate": lambda: whole_process([framegate, "generate", "--model", package,
                                                "--seed", "0", "--out", tmp / "g1",
                                                "--threads", "1"]),
            "python": lambda: whole_process([sys.executable, PYTHON_LOOP, "--model", package,
                                             "--seed", "0", "--out", tmp / "g2",
                                             "--threads", "1"]),
        }, repeats)
        table.add("`generate --model clean` / the Python loop (python_sampler.py)",
                  t["framegate"], t["python"],
                  [f / p for f, p in zip(t["framegate"], t["python"])], "", 0.5)
    print(f"after: {load()}\n")
    table.print()
    print(LEGEND)


if __name__ == "__main__":
    main()
