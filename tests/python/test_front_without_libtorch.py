"""build/bin/framegate is a front that does not load LibTorch (issue 17): it serves the
store's commands, report (every output, the HTML's golden frames included), metrics, list, --help
and --version itself, and execs libexec/framegate/framegate-pipeline for the others with
the same argv, so that their output and exit code are the pipeline executable's.

"Does not load" is checked twice: the front's dynamic section needs no LibTorch library
(ldd), and a run of each command under LD_DEBUG=libs maps none.
"""
import os
import subprocess

import numpy as np
import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")

FAST = ["--size", "tiny", "--steps", "2", "--threads", "1"]
TORCH_LIBRARIES = ("libtorch", "libc10")


def pipeline_executable():
    bin_dir = os.path.dirname(os.path.realpath(FRAMEGATE))
    return os.path.join(os.path.dirname(bin_dir), "libexec", "framegate", "framegate-pipeline")


def traced(tmp_path, *args, exe=None):
    """Runs a command with the dynamic loader's library trace; returns the result and the
    libraries it loaded (the trace of every process the command became)."""
    trace = tmp_path / "ld-trace"
    for old in tmp_path.glob("ld-trace.*"):
        old.unlink()
    env = {**os.environ, "LD_DEBUG": "libs", "LD_DEBUG_OUTPUT": str(trace)}
    r = subprocess.run([exe or FRAMEGATE, *map(str, args)], capture_output=True, text=True,
                       cwd=tmp_path, env=env)
    loaded = set()
    for f in tmp_path.glob("ld-trace.*"):
        for line in f.read_text(errors="replace").splitlines():
            if "calling init:" in line:
                loaded.add(line.split("calling init:")[1].strip())
    return r, loaded


def torch_in(loaded):
    return sorted(l for l in loaded if any(t in os.path.basename(l) for t in TORCH_LIBRARIES))


def test_front_needs_no_libtorch_library():
    ldd = subprocess.run(["ldd", FRAMEGATE], capture_output=True, text=True, check=True).stdout
    assert not [l for l in ldd.splitlines() if any(t in l for t in TORCH_LIBRARIES)], ldd
    pipeline = subprocess.run(["ldd", pipeline_executable()], capture_output=True, text=True,
                              check=True).stdout
    assert "libtorch" in pipeline, "the trace below would prove nothing"


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory):
    """A real run of one tiny cell with its golden (the HTML report shows golden frames)."""
    d = tmp_path_factory.mktemp("run")
    golden = d / "golden"
    subprocess.run([FRAMEGATE, "golden", "make", *FAST, "--golden-dir", golden],
                   check=True, capture_output=True)
    r = subprocess.run([FRAMEGATE, "run", *FAST, "--policy", "fp32", "--golden-dir", golden,
                        "--db", d / "a.db", "--artifacts", d / "artifacts"],
                       capture_output=True, text=True, cwd=d)
    assert r.returncode == 0, r.stdout + r.stderr
    for run_id in ("r1", "r2"):
        r = subprocess.run([FRAMEGATE, "db", "test-write", "--db", d / "s.db", "--run-id", run_id,
                            "--cells", "4", "--finish"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    frames = np.linspace(0, 1, 2 * 16 * 16 * 3, dtype=np.float32).reshape(2, 16, 16, 3)
    np.save(d / "ref.npy", frames)
    np.save(d / "cand.npy", (frames * 0.9).astype(np.float32))
    return d


def test_a_pipeline_command_through_the_front_loads_libtorch(tmp_path):
    r, loaded = traced(tmp_path, "info")
    assert r.returncode == 0, r.stderr
    assert torch_in(loaded), "the library trace sees LibTorch when it is loaded"


@pytest.mark.parametrize("args", [
    ["--help"], ["--version"], ["no-such-command"], ["history", "--help"],
    ["db", "check", "--db", "{d}/s.db"],
    ["history", "--db", "{d}/s.db", "--filter", "policy=fp32"],
    ["regressions", "--db", "{d}/s.db"],
    ["compare", "r1", "r2", "--db", "{d}/s.db"],
    ["merge", "{d}/merged.db", "{d}/s.db"],
    ["report", "latest", "--db", "{d}/a.db", "--json", "-", "--junit", "{d}/junit.xml",
     "--bench-json", "{d}/bench.json", "--html", "{d}/html"],
    ["list", "smoke"],
    ["list", "nightly", "--json", "-"],
    ["metrics", "{d}/ref.npy", "{d}/cand.npy", "--json", "{d}/metrics.json"],
    ["metrics", "--help"],
])
def test_served_without_libtorch(tmp_path, stored_run, args):
    args = [a.replace("{d}", str(stored_run)) for a in args]
    r, loaded = traced(tmp_path, *args)
    assert loaded, "no library trace: LD_DEBUG did not work"
    assert not torch_in(loaded), (args, torch_in(loaded))
    expected = 2 if args[0] == "no-such-command" else 0
    if args[0] in ("compare", "regressions"):
        expected = r.returncode  # 1 on a regression: the command's answer, not ours
    assert r.returncode == expected, (args, r.stdout, r.stderr)
    if args[0] == "--help":
        for command in ("advise", "check", "generate", "golden", "info", "run", "history",
                        "report", "list", "metrics"):
            assert f"\n  {command} " in r.stdout, r.stdout
        assert "run-cell" not in r.stdout
    if args == ["metrics", "--help"]:  # std::threads over frames, not LibTorch's
        assert "LibTorch" not in r.stdout and "default 0: every core" in r.stdout, r.stdout
    if args[0] == "no-such-command":
        assert r.stderr == "framegate: error: unknown command 'no-such-command' (see 'framegate --help')\n"
    if args[0] == "report":
        html = stored_run / "html"
        assert (html / "index.html").exists()
        goldens = list(html.rglob("golden_*.png"))
        assert goldens, sorted(p.name for p in html.rglob("*"))[:20]


@pytest.mark.parametrize("args", [
    ["info"],
    ["check", *FAST, "--policy", "fp32,bf16"],
    ["check", *FAST, "--policy", "no-such-policy"],
    ["check", "--no-such-flag"],
    ["generate", "--help"],
])
def test_pipeline_commands_answer_through_the_front_as_before(tmp_path, args):
    front = subprocess.run([FRAMEGATE, *args], capture_output=True, text=True, cwd=tmp_path)
    direct = subprocess.run([pipeline_executable(), *args], capture_output=True, text=True,
                            cwd=tmp_path)
    assert front.returncode == direct.returncode, (front.stderr, direct.stderr)
    # Timings and free memory change from one run to the next.
    strip = lambda s: "\n".join(l for l in s.splitlines()
                                if "seconds" not in l and " s " not in l and "iB" not in l)
    if args[0] != "check" or front.returncode == 2:
        assert strip(front.stdout.replace(FRAMEGATE, "")) == strip(direct.stdout.replace(pipeline_executable(), "")), args
    assert front.stderr.replace(FRAMEGATE, "") == direct.stderr.replace(pipeline_executable(), "")


def test_check_exit_code_passes_through(tmp_path):
    r = subprocess.run([FRAMEGATE, "check", *FAST, "--policy", "fp16-emulated", "--fault",
                        "attn-overflow"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
