"""The include layers hold (tests/tools/check_include_layers.py), and the checker catches a
forbidden include when there is one."""
import os
import pathlib
import subprocess
import sys

SOURCE_DIR = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
CHECKER = SOURCE_DIR / "tests" / "tools" / "check_include_layers.py"


def check(root):
    return subprocess.run([sys.executable, str(CHECKER), str(root)], capture_output=True, text=True)


def test_the_repository_has_no_upward_include():
    result = check(SOURCE_DIR)
    assert result.returncode == 0, result.stdout
    assert "0 forbidden include(s)" in result.stdout


def write(root, path, text):
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


def test_each_forbidden_arrow_is_reported_with_file_and_line(tmp_path):
    write(tmp_path, "harness/cell.h", '#pragma once\n#include "harness/status.h"\n#include "cli/commands.h"\n')
    write(tmp_path, "checks/verdict.cc", '#include "store/schema.h"\n')
    write(tmp_path, "reports/html.cc", '#include "harness/cell.h"\n#include "pipelines/sampler.h"\n')
    write(tmp_path, "matrix/m.cc", '#include "runners/cell_runner.h"\n#include <vector>\n')
    write(tmp_path, "pipelines/p.cc", '#include "reports/markup.h"\n#include "tolerances_toml.h"\n')
    write(tmp_path, "cli/main.cc", '#include "runners/cell_runner.h"\n#include "reports/markup.h"\n')
    write(tmp_path, "runners/r.cc", '#include "matrix/matrix_spec.h"\n#include "store/result_store.h"\n')
    result = check(tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[-1] == "include layers: 5 forbidden include(s)"
    assert set(lines[:-1]) == {
        "harness/cell.h:3: harness/ may not include cli/commands.h (cli/ is not below it)",
        "checks/verdict.cc:1: checks/ may not include store/schema.h "
        "(store/ is not below it)",
        "matrix/m.cc:1: matrix/ may not include runners/cell_runner.h (runners/ is not below it)",
        "pipelines/p.cc:1: pipelines/ may not include reports/markup.h (reports/ is not below it)",
        "reports/html.cc:2: reports/ may not include pipelines/sampler.h (pipelines/ is not below it)",
    }
