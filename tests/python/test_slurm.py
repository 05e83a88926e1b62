"""runners/slurm/ against a REAL one-node Slurm cluster that this module starts and stops
itself (shared/design/slurm-local.md): its own munged (private key and socket), slurmctld
and slurmd on free ports, two stand-in GPUs (character devices in gres.conf). Skipped, with
the reason, only when the daemons cannot start here (slurm-wlm and munge are installed by
ci/install-deps.sh --with-extras)."""
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
ORCHESTRATOR = SOURCE / "runners" / "slurm" / "framegate_slurm.py"
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")
DAEMONS = ["munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(d, user, gpus):
    gres = "GresTypes=gpu\n" if gpus else ""
    node_gres = " Gres=gpu:2" if gpus else ""
    return f"""ClusterName=fgtest
SlurmctldHost=localhost
SlurmUser={user}
SlurmdUser={user}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MpiDefault=none
ReturnToService=2
MinJobAge=600
{gres}NodeName=localhost CPUs=2 RealMemory=4000{node_gres} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def tail(path, lines=5):
    return " | ".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


class LocalSlurm:
    """munged + slurmctld + slurmd under one folder; stop() ends them by their pid files."""

    def __init__(self, d):
        self.d = d
        self.env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"))
        self.gpus = False

    def start(self):
        d = self.d
        for sub in ("state", "spool", "log"):
            (d / sub).mkdir()
        (d / "munge.key").write_bytes(os.urandom(1024))
        os.chmod(d / "munge.key", 0o600)
        try:  # stand-in GPUs must be character devices (needs root)
            for i in range(2):
                os.mknod(d / f"fakegpu{i}", 0o666 | 0o020000, os.makedev(1, 3))
            (d / "gres.conf").write_text(f"NodeName=localhost Name=gpu File={d}/fakegpu[0-1]\n")
            self.gpus = True
        except PermissionError:
            pass
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        (d / "slurm.conf").write_text(slurm_conf(d, user, self.gpus))
        self.launch(["munged", f"--socket={d}/munge.sock", f"--key-file={d}/munge.key",
                     f"--log-file={d}/log/munged.log", f"--pid-file={d}/munged.pid",
                     f"--seed-file={d}/munged.seed"], d / "log/munged.log")
        self.launch(["slurmctld", "-f", str(d / "slurm.conf")], d / "log/slurmctld.log")
        self.launch(["slurmd", "-f", str(d / "slurm.conf"), "-N", "localhost"], d / "log/slurmd.log")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = self.cli("sinfo", "-h", "-o", "%t").stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        raise RuntimeError(f"node not idle after 30 s (sinfo: {state!r}); slurmctld: "
                           f"{tail(d / 'log/slurmctld.log')}; slurmd: {tail(d / 'log/slurmd.log')}")

    def launch(self, cmd, log):
        p = subprocess.run([shutil.which(cmd[0]) or cmd[0]] + cmd[1:], env=self.env,
                           capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise RuntimeError(f"{cmd[0]} exited {p.returncode}: {(p.stderr or p.stdout).strip()} "
                               f"{tail(log)}")

    def cli(self, *cmd):
        return subprocess.run(list(cmd), env=self.env, capture_output=True, text=True, timeout=30)

    def stop(self):
        pids = []
        for name in ("slurmd", "slurmctld", "munged"):
            try:
                pid = int((self.d / f"{name}.pid").read_text())
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
            except (FileNotFoundError, ValueError, ProcessLookupError):
                pass
        deadline = time.monotonic() + 10
        for pid in pids:
            while time.monotonic() < deadline and pathlib.Path(f"/proc/{pid}").exists():
                time.sleep(0.1)


@pytest.fixture(scope="module")
def slurm():
    missing = [c for c in DAEMONS if not shutil.which(c)]
    if missing:
        pytest.skip(f"slurmctld cannot start here: {', '.join(missing)} not installed "
                    "(ci/install-deps.sh --with-extras installs slurm-wlm and munge)")
    # Not under pytest's 0700 tmp folders: munged wants every directory above its socket
    # searchable by all; a short path also keeps the socket under the 108-byte limit.
    d = pathlib.Path(tempfile.mkdtemp(prefix="framegate-slurm-"))
    d.chmod(0o755)
    cluster = LocalSlurm(d)
    try:
        cluster.start()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        cluster.stop()
        shutil.rmtree(d, ignore_errors=True)
        pytest.skip(f"slurmctld cannot start here: {e}")
    yield cluster
    cluster.stop()
    shutil.rmtree(d, ignore_errors=True)


def orchestrate(slurm, *args, timeout=240):
    return subprocess.run(["/usr/bin/python3", str(ORCHESTRATOR), *map(str, args)], env=slurm.env,
                          capture_output=True, text=True, timeout=timeout)


def statuses(db, run_ids=None):
    """{cell_id: status} of a database's cells (of the given runs)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT run_id, cell_id, status FROM cells").fetchall()
    return {cell: status for run, cell, status in rows if run_ids is None or run in run_ids}


def shard_run_ids(out, shards):
    ids = {}
    for i in range(1, shards + 1):
        with sqlite3.connect(out / f"shard-{i}.db") as conn:
            ids[i] = [r[0] for r in conn.execute("SELECT run_id FROM runs")]
    return ids


# Six tiny CPU cells, one thread each: passing cells, fp16 (UNSUPPORTED where LibTorch has
# no FP16 kernels on the CPU, before 2.2), an XFAIL (F1 declared) and a real failure (F2 not declared: NONFINITE/BROKEN_FRAMES), so
# the gate must say 1 and the statuses compared are not all PASS.
TINY_MATRIX = """
name = "slurm-test"
timeout = 120
[axes]
pipelines = ["tiny"]
devices = ["cpu"]
policies = ["fp32", "bf16", "fp16", "fp16-emulated"]
seeds = [0]
[[include]]
policy = "bf16"
fault = "time-embed-fp32"
[[include]]
policy = "fp16-emulated"
fault = "attn-overflow"
[[xfail]]
fault = "time-embed-fp32"
reason = "F1 must end ERROR dtype_mismatch"
"""


def test_four_shard_array_merges_to_the_statuses_of_a_single_process_run(slurm, tmp_path):
    matrix = tmp_path / "tiny.toml"
    matrix.write_text(TINY_MATRIX)
    run_args = ["--golden-dir", SOURCE / "golden", "--threads", "1"]
    out = tmp_path / "fleet"
    fleet = orchestrate(slurm, matrix, "--shards", 4, "--out", out, "--framegate", FRAMEGATE,
                        "--poll", 1, "--", *run_args)
    single = subprocess.run([FRAMEGATE, "run", str(matrix), "--db", str(tmp_path / "single.db"),
                             "--artifacts", str(tmp_path / "single-artifacts"), *map(str, run_args)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert single.returncode == 1, single.stdout + single.stderr
    assert fleet.returncode == 1, fleet.stdout + fleet.stderr
    expected = statuses(tmp_path / "single.db")
    assert len(expected) == 6 and {"PASS", "XFAIL"} <= set(expected.values())
    # The shards partition the matrix: each cell ran in exactly one shard.
    runs = shard_run_ids(out, 4)
    assert all(len(ids) == 1 for ids in runs.values())
    per_shard = [statuses(out / f"shard-{i}.db") for i in range(1, 5)]
    assert sum(len(s) for s in per_shard) == 6
    merged = statuses(out / "merged.db", {ids[0] for ids in runs.values()})
    assert merged == expected
    failing = [c for c, s in expected.items() if s not in ("PASS", "UNSUPPORTED", "XFAIL")]
    assert len(failing) == 1 and failing[0] in fleet.stdout
    assert "gate: 6 cells" in fleet.stdout and "1 failing" in fleet.stdout and "-> exit 1" in fleet.stdout
    for i in range(1, 5):
        assert (out / f"shard-{i}.rc").read_text().strip() in ("0", "1")
        assert (out / "report" / f"shard-{i}" / "junit.xml").exists()


GPU_MATRIX = """
[axes]
pipelines = ["tiny"]
devices = ["cuda:0"]
policies = ["fp32", "bf16", "fp16", "fp16-emulated"]
"""


def test_gpu_matrix_gets_one_gpu_per_array_task(slurm, tmp_path):
    if not slurm.gpus:
        pytest.skip("stand-in GPUs need mknod (root)")
    matrix = tmp_path / "gpu.toml"
    matrix.write_text(GPU_MATRIX)
    out = tmp_path / "fleet"
    dry = orchestrate(slurm, matrix, "--shards", 2, "--out", out, "--framegate", FRAMEGATE, "--dry-run")
    assert dry.returncode == 0 and "--gres=gpu:1" in dry.stdout and "--array=1-2" in dry.stdout
    assert not out.exists()
    fleet = orchestrate(slurm, matrix, "--shards", 2, "--out", out, "--framegate", FRAMEGATE, "--poll", 1)
    # No GPU on this machine: every cell is UNSUPPORTED here, which passes the gate.
    assert fleet.returncode == 0, fleet.stdout + fleet.stderr
    assert set(statuses(out / "merged.db").values()) == {"UNSUPPORTED"}
    for i in (1, 2):  # each task was given exactly one of the two stand-in GPUs
        log = (out / "slurm" / f"shard-{i}.out").read_text()
        assert re.search(r"CUDA_VISIBLE_DEVICES=[01]\)", log), log
    job = fleet.stdout.split()[1].rstrip(":")
    assert "gres:gpu:1" in slurm.cli("scontrol", "show", "job", job).stdout


def test_cpu_matrix_asks_for_no_gpu(slurm, tmp_path):
    matrix = tmp_path / "tiny.toml"
    matrix.write_text(TINY_MATRIX)
    dry = orchestrate(slurm, matrix, "--shards", 3, "--out", tmp_path / "o", "--framegate", FRAMEGATE,
                      "--dry-run", "--", "--tags", "nightly")
    assert dry.returncode == 0, dry.stderr
    assert "--gres" not in dry.stdout and dry.stdout.rstrip().endswith(f"{matrix} 3 --tags nightly")


def test_shards_that_exit_2_make_the_gate_exit_2(slurm, tmp_path):
    out = tmp_path / "fleet"
    fleet = orchestrate(slurm, "smoke", "--shards", 2, "--out", out, "--framegate", FRAMEGATE,
                        "--gres", "none", "--poll", 1, "--", "--no-such-option")
    assert fleet.returncode == 2, fleet.stdout + fleet.stderr
    assert "error: shard 1/2 exited 2" in fleet.stdout and "error: shard 2/2 exited 2" in fleet.stdout
    assert "-> exit 2" in fleet.stdout


def test_max_wait_cancels_the_array_and_exits_2(slurm, tmp_path):
    fleet = orchestrate(slurm, "smoke", "--shards", 2, "--out", tmp_path / "fleet", "--framegate", FRAMEGATE,
                        "--gres", "none", "--poll", 0.5, "--max-wait", 2, "--sbatch-arg=--hold")
    assert fleet.returncode == 2, fleet.stdout + fleet.stderr
    assert "--max-wait 2s; cancelled" in fleet.stderr
    job = fleet.stdout.split()[1].rstrip(":")
    assert "CANCELLED" in slurm.cli("squeue", "-h", "-r", "-t", "all", "-j", job, "-o", "%T").stdout


def test_sigterm_cancels_the_array_and_exits_130(slurm, tmp_path):
    p = subprocess.Popen(["/usr/bin/python3", str(ORCHESTRATOR), "smoke", "--shards", "2", "--out",
                          str(tmp_path / "fleet"), "--framegate", FRAMEGATE, "--gres", "none",
                          "--poll", "0.5", "--sbatch-arg=--hold"],
                         env=slurm.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    job = p.stdout.readline().split()[1].rstrip(":")  # "job 12: 2 shards of smoke -> ..."
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert f"cancelled job {job}" in err
    assert "CANCELLED" in slurm.cli("squeue", "-h", "-r", "-t", "all", "-j", job, "-o", "%T").stdout


def test_bad_submission_and_used_folder_are_one_line_errors(slurm, tmp_path):
    bad = orchestrate(slurm, "smoke", "--shards", 2, "--out", tmp_path / "a", "--framegate", FRAMEGATE,
                      "--gres", "none", "--sbatch-arg=--partition=nosuchpartition")
    assert bad.returncode == 2
    assert bad.stderr.startswith("framegate-slurm: error: sbatch failed:") and "partition" in bad.stderr
    used = tmp_path / "used"
    used.mkdir()
    (used / "shard-1.db").write_text("kept")
    again = orchestrate(slurm, "smoke", "--shards", 2, "--out", used, "--framegate", FRAMEGATE,
                        "--gres", "none")
    assert again.returncode == 2 and len(again.stderr.splitlines()) == 1
    assert f"{used}: already holds a run" in again.stderr
    assert (used / "shard-1.db").read_text() == "kept"
