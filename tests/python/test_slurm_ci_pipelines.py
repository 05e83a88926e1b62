"""The nightly pipelines in ci/ run their own command lines here: each shard job's script
(read from the YAML, CI variables set as the CI would) in a workspace where build/bin/
framegate is the binary under test, then the merge-and-report job's orchestrator call.
No Slurm and no CI service: what is checked is that the commands the pipelines hold work
together and gate correctly."""
import os
import pathlib
import re
import sqlite3
import subprocess

import pytest
import yaml

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")

# Every cell UNSUPPORTED on a machine without CUDA: the pipelines' plumbing, in seconds.
GPU_MATRIX = """
[axes]
pipelines = ["tiny"]
devices = ["cuda:0"]
policies = ["fp32", "bf16", "fp16", "fp16-emulated", "fp8e4m3-bf16", "tf32"]
"""


def workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / "build" / "bin").mkdir(parents=True)
    (ws / "build" / "bin" / "framegate").symlink_to(FRAMEGATE)
    (ws / "runners").symlink_to(SOURCE / "runners")
    (ws / "gpu.toml").write_text(GPU_MATRIX)
    return ws


def sh(ws, script, env):
    return subprocess.run(["bash", "-e", "-c", script], cwd=ws, env=dict(os.environ, **env),
                          capture_output=True, text=True, timeout=120)


def merged_statuses(ws):
    with sqlite3.connect(ws / "out" / "merged.db") as conn:
        return [r[0] for r in conn.execute("SELECT status FROM cells")]


def test_gitlab_shard_jobs_then_report_job(tmp_path):
    ci = yaml.safe_load((SOURCE / "ci/gitlab/nightly.gitlab-ci.yml").read_text())
    ws = workspace(tmp_path)
    shard_job, report_job = ci["framegate-shard"], ci["framegate-report"]
    total = shard_job["parallel"]
    env = dict(FRAMEGATE_MATRIX="gpu.toml", FRAMEGATE_RUN_ARGS="--threads 1")
    shard_lines = [line for line in shard_job["script"] if "ci/build.sh" not in line]
    for i in range(1, total + 1):
        done = sh(ws, "\n".join(shard_lines), dict(env, CI_NODE_INDEX=str(i), CI_NODE_TOTAL=str(total)))
        assert done.returncode == 0, done.stdout + done.stderr
        assert (ws / "out" / f"shard-{i}.rc").read_text().strip() == "0"
    assert f"--shards {total}" in " ".join(report_job["script"])  # the report job knows the count
    report = sh(ws, "\n".join(l for l in report_job["script"] if "ci/build.sh" not in l), env)
    assert report.returncode == 0, report.stdout + report.stderr
    assert merged_statuses(ws) == ["UNSUPPORTED"] * 6
    assert "gate: 6 cells" in report.stdout
    for path in report_job["artifacts"]["reports"]["junit"].split():
        assert list(ws.glob(path)), path


def test_github_shard_jobs_then_merge_job_and_a_lost_shard_is_exit_2(tmp_path):
    wf = yaml.safe_load((SOURCE / "ci/github/nightly.yml").read_text())
    ws = workspace(tmp_path)
    shards = wf["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    assert len(shards) == int(wf["env"]["SHARDS"])
    env = dict(MATRIX="gpu.toml", SHARDS=str(len(shards)), RUN_ARGS="--threads 1")
    run_step = next(s for s in wf["jobs"]["shard"]["steps"] if "framegate run" in s.get("run", ""))
    merge_step = next(s for s in wf["jobs"]["merge-and-report"]["steps"] if "--collect" in s.get("run", ""))
    for i in shards:
        script = re.sub(r"\$\{\{ *matrix\.shard *\}\}", str(i), run_step["run"])
        done = sh(ws, script, env)
        assert done.returncode == 0, done.stdout + done.stderr
    merged = sh(ws, merge_step["run"], env)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert merged_statuses(ws) == ["UNSUPPORTED"] * 6
    # A shard job that never finished leaves no .rc file: the gate says 2, not a pass.
    (ws / "out" / "shard-2.rc").unlink()
    lost = sh(ws, merge_step["run"], env)
    assert lost.returncode == 2
    assert f"shard 2/{len(shards)} did not finish" in lost.stdout
