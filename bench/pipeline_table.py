#!/usr/bin/python3
"""Runs framegate_pipeline_bench once and prints the markdown table of docs/benchmarks.md.

    /usr/bin/python3 bench/pipeline_table.py [--binary PATH] [--repetitions N] [--threads N]

One run of the binary, N repetitions of every benchmark in it; every figure is the median
over the repetitions of that same run (the matmul the ratio divides by included). Per size:

  step ms          one denoiser step (PredictNoise at the CFG batch), FP32
  step GFLOP/s     analytic FLOPs of a step (pipelines/flop_count.h) over its wall time
  decode ms        one decode of all T frames; decode fps = T / decode time
  generation s     steps x step + decode, the estimate of a whole generation
  generation fps   T / generation s
  peak RSS         the process's peak resident set while that size's step or decode ran
  matmul GFLOP/s   BM_MatmulFp32/2048, the rate this machine's BLAS reaches
  step/matmul      step GFLOP/s over matmul GFLOP/s (the two medians): how close the
                   pipeline runs to this machine's limit
  paired           median over repetitions of step GFLOP/s over the 2048 matmul probe
                   timed just before and after that repetition's steps (probe_GFLOP/s):
                   the same ratio, robust to load that comes and goes on a shared machine

Standard library only. Exit 2 when the binary cannot run or its output cannot be read.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BINARY = os.path.join(REPO, "build", "bench", "framegate_pipeline_bench")
MATMUL = "BM_MatmulFp32/2048"


def run_bench(binary, repetitions, threads):
    """Runs the benchmark binary; returns its parsed JSON output."""
    env = dict(os.environ)
    if threads is not None:
        env["FRAMEGATE_THREADS"] = str(threads)
    cmd = [binary, "--benchmark_format=json",
           "--benchmark_repetitions=%d" % repetitions,
           "--benchmark_report_aggregates_only=false"]
    print("running: %s%s" % ("FRAMEGATE_THREADS=%s " % threads if threads is not None else "",
                              " ".join(cmd)), file=sys.stderr)
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, check=False)
    except OSError as e:
        sys.exit("pipeline_table: cannot run %s: %s (build it: ninja -C build "
                 "framegate_pipeline_bench)" % (binary, e))
    if proc.returncode != 0:
        sys.exit("pipeline_table: %s exited with %d" % (binary, proc.returncode))
    try:
        return json.loads(proc.stdout)
    except ValueError as e:
        sys.exit("pipeline_table: unreadable JSON from %s: %s" % (binary, e))


def repetitions_by_name(report):
    """{benchmark name: [per-repetition entries]}; aggregates and failed runs dropped."""
    runs = {}
    for b in report.get("benchmarks", []):
        if b.get("run_type") != "iteration":
            continue
        if b.get("error_occurred"):
            print("pipeline_table: %s failed: %s" % (b["name"], b.get("error_message")),
                  file=sys.stderr)
            continue
        runs.setdefault(base_name(b.get("run_name", b["name"])), []).append(b)
    return runs


def base_name(run_name):
    """BM_Decode/tiny/iterations:19/real_time -> BM_Decode/tiny (suffixes dropped)."""
    parts = [p for p in run_name.split("/")
             if ":" not in p and p not in ("real_time", "manual_time")]
    return "/".join(parts)


def median(runs, key):
    return statistics.median(float(r[key]) for r in runs)


def seconds_per_iteration(run):
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[run["time_unit"]]
    return float(run["real_time"]) * scale


def median_seconds(runs):
    return statistics.median(seconds_per_iteration(r) for r in runs)


def spread(runs):
    """(max - min) / median of the per-iteration time, as a percentage."""
    times = [seconds_per_iteration(r) for r in runs]
    return 100.0 * (max(times) - min(times)) / statistics.median(times)


def mib(nbytes):
    return "%.0f MiB" % (nbytes / 2**20)


def size_names(runs):
    """Sizes in the order the binary ran them."""
    names = []
    for name in runs:
        if name.startswith("BM_DenoiserStep/"):
            names.append(name.split("/", 1)[1])
    return names


def table(report):
    runs = repetitions_by_name(report)
    if MATMUL not in runs:
        sys.exit("pipeline_table: no %s result in the run" % MATMUL)
    matmul = median(runs[MATMUL], "GFLOP/s")
    lines = [
        "| size | step ms (spread) | step GFLOP/s | decode ms | decode frames/s | "
        "steps | generation s | generation frames/s | peak RSS | matmul GFLOP/s | "
        "step/matmul | paired |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in size_names(runs):
        step = runs.get("BM_DenoiserStep/" + size)
        decode = runs.get("BM_Decode/" + size)
        if not step or not decode:
            continue
        step_s, decode_s = median_seconds(step), median_seconds(decode)
        steps = int(step[0]["steps"])
        frames = int(decode[0]["frames"])
        generation_s = steps * step_s + decode_s
        step_gflops = median(step, "GFLOP/s")
        peak = max(median(step, "peak_rss_bytes"), median(decode, "peak_rss_bytes"))
        paired = statistics.median(
            float(r["GFLOP/s"]) / float(r["probe_GFLOP/s"]) for r in step)
        lines.append(
            "| %s (batch %d) | %.1f (%.0f%%) | %.1f | %.1f | %.1f | %d | %.2f | %.2f | %s | "
            "%.1f | %.2f | %.2f |" % (
                size, int(step[0]["batch"]), 1e3 * step_s, spread(step), step_gflops,
                1e3 * decode_s, median(decode, "frames/s"), steps, generation_s,
                frames / generation_s, mib(peak), matmul, step_gflops / matmul, paired))
    return "\n".join(lines)


def machine(report, repetitions):
    ctx = report.get("context", {})
    return "\n".join([
        "- CPU: %s, %s logical cores for this process (features: %s)" % (
            ctx.get("cpu_model", "?"), ctx.get("cpu_logical_cores", "?"),
            ctx.get("cpu_features", "?")),
        "- LibTorch %s, BLAS %s, %s intra-op threads, device %s" % (
            ctx.get("libtorch", "?"), ctx.get("blas", "?"), ctx.get("framegate_threads", "?"),
            ctx.get("device", "?")),
        "- framegate %s, %s; run %s; %d repetitions, medians; sizes skipped: %s" % (
            ctx.get("framegate_git_sha", "?"), ctx.get("compiler", "?"), ctx.get("date", "?"),
            repetitions, ctx.get("skipped_sizes", "?")),
        "- peak RSS is the whole process's, LibTorch's baseline of %s included" % (
            mib(float(ctx.get("baseline_rss_bytes", "nan")))),
        "- 1-minute load average: %s (the machine is shared: other work inflates times)" % (
            ctx.get("load_average", "?")),
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=DEFAULT_BINARY)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None,
                        help="FRAMEGATE_THREADS for the run (default: every core)")
    parser.add_argument("--json", default=None,
                        help="also write the binary's raw JSON output to this file")
    args = parser.parse_args()
    if args.repetitions < 1:
        parser.error("--repetitions must be >= 1")
    load_before = os.getloadavg()[0]
    report = run_bench(args.binary, args.repetitions, args.threads)
    report.setdefault("context", {})["load_average"] = "%.2f before, %.2f after" % (
        load_before, os.getloadavg()[0])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    print(machine(report, args.repetitions))
    print()
    print(table(report))


if __name__ == "__main__":
    try:
        main()
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            sys.exit(2)
        raise
