#!/usr/bin/python3
"""Writes this host's CTest resource-spec file (JSON, version 1.0) from nvidia-smi.

framegate_add_matrix_tests (cmake/FramegateMatrixTests.cmake) gives every cell on
cuda:N the resource group "gpus:1,cudaN:1": one slot of the pool "gpus" (at most one cell
per GPU at a time) and the slot of its own GPU "cudaN" (the cell runs on the GPU the
matrix named). This script describes both pools:

  {"version": {"major": 1, "minor": 0},
   "local": [{"gpus": [{"id": "0", "slots": 1}, ...], "cuda0": [{"id": "0", "slots": 1}], ...}]}

With no nvidia-smi, or no GPU, "gpus" is an empty list (CPU cells still run).
Usage: make_resource_spec.py [--out FILE] [--slots N]   (standard library only)
"""
import argparse
import json
import subprocess
import sys


def gpu_indices(nvidia_smi="nvidia-smi"):
    """The GPU indices nvidia-smi reports, [] when it is missing or fails."""
    try:
        result = subprocess.run([nvidia_smi, "--query-gpu=index", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if result.returncode != 0:
        return []
    return [line.strip() for line in result.stdout.splitlines() if line.strip().isdigit()]


def resource_spec(indices, slots=1):
    pools = {"gpus": [{"id": i, "slots": slots} for i in indices]}
    for i in indices:
        pools["cuda" + i] = [{"id": i, "slots": slots}]
    return {"version": {"major": 1, "minor": 0}, "local": [pools]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="file to write (default: standard output)")
    parser.add_argument("--slots", type=int, default=1, help="cells per GPU at a time (default 1)")
    parser.add_argument("--nvidia-smi", default="nvidia-smi", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.slots < 1:
        parser.error("--slots must be >= 1")
    text = json.dumps(resource_spec(gpu_indices(args.nvidia_smi), args.slots), indent=2) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
