"""bench/nightly_cost.py --quick runs end to end and prints its table (no timing asserted:
the figures depend on the machine and its load)."""
import os
import pathlib
import subprocess
import sys

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")
REPO = pathlib.Path(__file__).resolve().parents[2]


def test_quick_run_prints_the_table():
    build = pathlib.Path(FRAMEGATE).resolve().parents[1]
    r = subprocess.run([sys.executable, str(REPO / "bench" / "nightly_cost.py"), "--quick",
                        "--build", str(build)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith("before: load average ") and "\nafter: load average " in out, out
    rows = [l for l in out.splitlines() if l.startswith("| ") and "---" not in l]
    assert rows[0].startswith("| measurement |"), out
    for what in ("--isolation worker", "--isolation process", "`metrics`", "`history",
                 "`regressions`", "`compare", "`db check`", "`generate --model clean`"):
        assert any(what in row for row in rows[1:]), (what, out)
