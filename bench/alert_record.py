#!/usr/bin/python3
"""Records the A/A nights bench/alert_quality.py resamples: the 12-cell matrix of
bench/data/alert_matrix.toml run N times with the real `framegate run` into one real
SQLite store, nothing changed between runs but the background load, then saves the
measurements as a compact fixture (bench/data/alert_aa_nights.json) and one night's
run.json, trimmed, as the template every synthetic night is made from
(bench/data/alert_template_run.json).

Background load: the machine's other users (2 cores shared with 3 engineers' builds and
tests) vary it from night to night; --busy-loops adds one busy Python loop on the nights
drawn (fixed seed) for it. The load average before each night is kept in the fixture.
Cells run with --threads 1: with 2 OpenMP threads on an oversubscribed 2-core machine a
tiny cell took over 120 s (every cell a TIMEOUT), one thread 1-6 s.

  /usr/bin/python3 bench/alert_record.py --bin build/bin/framegate --nights 40
  /usr/bin/python3 bench/alert_record.py --bin build/bin/framegate --nights 12 --append  # 12 more
  /usr/bin/python3 bench/alert_record.py --nights 40 --fixture /tmp/aa.json --template /tmp/aa-template.json
"""
import argparse
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
MATRIX = REPO / "bench" / "data" / "alert_matrix.toml"
FIXTURE = REPO / "bench" / "data" / "alert_aa_nights.json"
TEMPLATE = REPO / "bench" / "data" / "alert_template_run.json"
BUSY_LOOP = "import time\nend = time.time() + 3600\nwhile time.time() < end: pass\n"


def record_night(binary, db, out_json, repeats, busy):
    loops = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(busy)]
    try:
        load = os.getloadavg()[0]
        start = time.time()
        proc = subprocess.run([binary, "run", str(MATRIX), "--repeats", str(repeats), "--warmup", "0",
                               "--threads", "1",
                               "--db", db, "--json", out_json, "--artifacts", str(pathlib.Path(db).parent / "artifacts"), "--tags", "aa-bench"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.time() - start
    finally:
        for p in loops:
            p.kill()
            p.wait()
    if proc.returncode not in (0, 1):
        sys.exit(f"framegate run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return load, wall


def metric(cell, name):
    m = cell.get("metrics") or {}
    return m.get(name)


def trim_template(run):
    """The run.json a synthetic night starts from: every cell kept, its bulky per-frame
    and per-step arrays emptied (regressions reads none of them)."""
    for cell in run["cells"]:
        cell["timings"]["step_seconds"] = cell["timings"]["step_seconds"][:1]
        cell["probes"] = []
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(REPO / "build" / "bin" / "framegate"))
    ap.add_argument("--nights", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--busy-loops", action="store_true", help="one busy loop on a random half of the nights")
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--work", default="", help="folder for the store and run.json files (default: a temp dir)")
    ap.add_argument("--append", action="store_true",
                    help="keep the fixture's nights and template and record --nights more after them "
                         "(a night whose metrics differ from the fixture's is refused: other code)")
    ap.add_argument("--fixture", default=str(FIXTURE), help="where the nights are written (and read, --append)")
    ap.add_argument("--template", default=str(TEMPLATE), help="where the first night's trimmed run.json is written")
    args = ap.parse_args()
    fixture_path, template_path = pathlib.Path(args.fixture), pathlib.Path(args.template)
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="framegate-aa-"))
    work.mkdir(parents=True, exist_ok=True)
    db = str(work / "aa.db")
    rng = random.Random(args.seed)
    nights, cells = [], None
    if args.append:
        kept = json.loads(fixture_path.read_text())
        if kept.get("repeats") != args.repeats:
            sys.exit(f"{fixture_path}: recorded with --repeats {kept.get('repeats')}, not {args.repeats}")
        nights, cells = kept["nights"], kept["cells"]
    for k in range(len(nights), len(nights) + args.nights):
        busy = rng.choice([0, 1]) if args.busy_loops else 0
        out = str(work / f"night{k:02d}.json")
        load, wall = record_night(args.bin, db, out, args.repeats, busy)
        run = json.load(open(out))
        if cells is None:
            cells = [{"cell_id": c["cell_id"], "policy": c["policy"], "seed": c["seed"]}
                     for c in run["cells"]]
            json.dump(trim_template(run), open(template_path, "w"), indent=1)
        by_id = {c["cell_id"]: c for c in run["cells"]}
        missing = [c["cell_id"] for c in cells if c["cell_id"] not in by_id]
        if missing:
            sys.exit(f"{out}: the matrix no longer has the fixture's cells {missing}")
        untimed = [f"{c['cell_id']} {c['status']}" for c in run["cells"] if not c["timings"]["generation_seconds"]]
        if untimed:
            sys.exit(f"{out}: cells without a timing, nothing recorded for this night: {untimed}")
        night = {"started_at": run["run"]["started_at"], "loadavg_1m": round(load, 2), "busy_loops": busy,
                 "wall_s": round(wall, 1), "status": [], "repeats": [], "min_psnr": [], "mean_ssim": [],
                 "rel_l2": []}
        for c in cells:
            r = by_id[c["cell_id"]]
            night["status"].append(r["status"])
            night["repeats"].append([round(x, 5) for x in r["timings"]["generation_seconds"]])
            for name in ("min_psnr", "mean_ssim", "rel_l2"):
                night[name].append(metric(r, name))
        if nights:
            # An A/A night changes nothing but the load: the CPU's metrics and statuses are
            # deterministic, so a night that differs there was recorded by other code (or
            # the code is not deterministic): it is not kept.
            last = nights[-1]
            for name in ("status", "min_psnr", "mean_ssim", "rel_l2"):
                if night[name] != last[name]:
                    sys.exit(f"{out}: {name} differs from the fixture's night {len(nights) - 1} "
                             f"({night[name]} != {last[name]}): not an A/A night; not kept")
        nights.append(night)
        print(f"night {k:2d}: busy {busy}, load {load:.2f}, {wall:.1f} s", flush=True)
        fixture = {"format": "framegate-alert-aa", "version": 1, "matrix": "bench/data/alert_matrix.toml",
                   "repeats": args.repeats, "recorded_with": "bench/alert_record.py", "cells": cells,
                   "nights": nights}
        fixture_path.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
    print(f"wrote {fixture_path} ({len(nights)} nights) and {template_path}; store {db}")


if __name__ == "__main__":
    main()
