"""Names that cannot hurt and matrix/policy input validated when it is read (issue 21),
through the real `framegate` binary. Each bad input gives exit 2 and ONE stderr line
"framegate: error: FILE:LINE:COL: ..." (or naming the flag) before any cell runs, and
leaves nothing behind: no folder outside the scratch area, no file a pasted name made,
no store.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")

RULE = "must be 1 to 64 characters of A-Z a-z 0-9 . _ + - (not . or ..)"
AXES = '[axes]\npipelines = ["tiny"]\ndevices = ["cpu"]\n'  # lines 1-3


def run(*args, cwd=None, timeout=300):
    return subprocess.run([FRAMEGATE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


def one_line_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("framegate: error: ") and r.stderr.count("\n") == 1, r.stderr
    for fragment in fragments:
        assert str(fragment) in r.stderr, (fragment, r.stderr)


def write(path, text):
    path.write_text(text)
    return path


# ---- restricted names --------------------------------------------------------------

def test_a_policy_name_that_climbs_out_of_its_folder_is_refused(tmp_path):
    victim = f"/tmp/fg-victim-{os.getpid()}"
    m = write(tmp_path / "m.toml",
              AXES + f'policies = ["{"/../../.." + victim}"]\n'
              f'[policy."/../../..{victim}"]\nbased_on = "fp32"\n')
    one_line_error(run("list", m), f"{m}:5:9: policy name '/../../..{victim}' {RULE}")
    db = tmp_path / "r.db"
    one_line_error(run("run", m, "--db", db, "--threads", "1", cwd=tmp_path), f"{m}:5:9: policy name")
    assert not pathlib.Path(victim).exists()
    assert not db.exists()


def test_a_250_character_policy_name_is_an_error_not_an_abort(tmp_path):
    name = "p" * 250
    m = write(tmp_path / "m.toml", AXES + f'policies = ["{name}"]\n[policy.{name}]\nbased_on = "fp32"\n')
    r = run("run", m, "--db", tmp_path / "r.db", "--threads", "1", cwd=tmp_path)
    one_line_error(r, f"{m}:5:9: policy name '{'p' * 64}... (250 characters)' {RULE}")


def test_a_policy_name_with_shell_code_is_refused_and_runs_nothing(tmp_path):
    m = write(tmp_path / "m.toml",
              AXES + 'policies = ["half emu $(touch PWNED)"]\n'
              '[policy."half emu $(touch PWNED)"]\nbased_on = "fp16-emulated"\n')
    one_line_error(run("run", m, "--db", tmp_path / "r.db", cwd=tmp_path),
                   f"{m}:5:9: policy name 'half emu $(touch PWNED)' {RULE}")
    assert not (tmp_path / "PWNED").exists()


def test_a_policy_file_is_held_to_the_same_rule(tmp_path):
    p = write(tmp_path / "p.toml", '\n[policy."../up"]\nstorage = "fp32"\n')
    one_line_error(run("run", "--size", "tiny", "--policy", "../up", "--policy-file", p,
                       "--db", tmp_path / "r.db"),
                   f"{p}:2:9: policy name '../up' {RULE}")
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("tags", ["../../x", "a b", "nightly,,gpu", "x" * 65, "."])
def test_run_tags_follow_the_name_rule(tmp_path, tags):
    r = run("run", "--size", "tiny", "--db", tmp_path / "r.db", "--tags", tags)
    one_line_error(r, "--tags", f"tag '", RULE)
    assert not (tmp_path / "r.db").exists()


def test_a_model_folder_name_and_a_model_toml_name_follow_the_rule(tmp_path):
    bad_folder = tmp_path / "my model"
    bad_folder.mkdir()
    (bad_folder / "model.toml").write_text('name = "ok"\n')
    m = write(tmp_path / "m.toml",
              '[axes]\npipelines = ["my model"]\ndevices = ["cpu"]\npolicies = ["fp32"]\n')
    one_line_error(run("list", m), f"{m}:2:14: pipeline name 'my model' {RULE}")

    sys.path.insert(0, str(SOURCE / "pipelines" / "crosscheck"))
    import make_crosscheck_package as pkg  # noqa: E402  (needs torch)
    d = pathlib.Path(pkg.write_package(str(tmp_path / "pkg")))
    text = (d / "model.toml").read_text()
    first, rest = text.split("\n", 1)
    assert first.startswith("name = ")
    (d / "model.toml").write_text('name = "../../etc"\n' + rest)
    r = run("check", "--model", d, "--golden-dir", tmp_path / "goldens", "--steps", "2", "--threads", "1")
    one_line_error(r, f"{d}/model.toml:1:8: pipeline name '../../etc' {RULE}")
    assert not (tmp_path / "goldens").exists() or not any((tmp_path / "goldens").iterdir())


# ---- fallback cycles -----------------------------------------------------------------

def test_a_fallback_cycle_is_refused_when_the_matrix_is_read(tmp_path):
    m = write(tmp_path / "m.toml",
              AXES + 'policies = ["loop"]\nfaults = ["attn-overflow"]\n'
              '[policy.loop]\nbased_on = "fp16-emulated"\nfallback = "loop"\n')
    r = run("run", m, "--fallback", "--db", tmp_path / "r.db", "--threads", "1", cwd=tmp_path, timeout=120)
    one_line_error(r, f"{m}:8:12: policy 'loop': fallback cycle loop -> loop")
    assert not (tmp_path / "r.db").exists()
    m2 = write(tmp_path / "m2.toml",
               AXES + 'policies = ["a"]\n[policy.a]\nbased_on = "bf16"\nfallback = "b"\n'
               '[policy.b]\nbased_on = "bf16"\nfallback = "a"\n')
    one_line_error(run("list", m2), f"{m2}:7:12: policy 'a': fallback cycle a -> b -> a")


# ---- numbers ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1000", "0.5"])
def test_matrix_guidance_has_the_command_lines_bounds(tmp_path, value):
    m = write(tmp_path / "m.toml", AXES + f'policies = ["fp32"]\nguidance = [{value}]\n')
    one_line_error(run("list", m), f"{m}:5:13: guidance must be a number from 1 to 100")
    r = run("check", "--size", "tiny", "--guidance", value, "--golden-dir", tmp_path / "g")
    one_line_error(r, "--guidance", "guidance must be a number from 1 to 100")


def test_matrix_guidance_nan_never_reaches_the_store(tmp_path):
    m = write(tmp_path / "m.toml", AXES + 'policies = ["fp32"]\nguidance = [nan]\n')
    db = tmp_path / "r.db"
    one_line_error(run("run", m, "--db", db, cwd=tmp_path), f"{m}:5:13: guidance")
    assert not db.exists()


@pytest.mark.parametrize("setting, message", [
    ("timeout = nan", "timeout must be a number of seconds > 0 and <= 604800"),
    ("timeout = inf", "timeout must be a number of seconds > 0 and <= 604800"),
    ("repeats = 10001", "repeats must be an integer from 1 to 10000"),
    ("warmup = -1", "warmup must be an integer from 0 to 10000"),
])
def test_matrix_settings_are_bounded(tmp_path, setting, message):
    m = write(tmp_path / "m.toml", setting + "\n" + AXES + 'policies = ["fp32"]\n')
    one_line_error(run("list", m), f"{m}:1:", message)


def test_steps_have_one_bound_on_the_command_line_and_in_a_matrix(tmp_path):
    m = write(tmp_path / "m.toml", AXES + 'policies = ["fp32"]\nsteps = [10001]\n')
    one_line_error(run("list", m), f"{m}:5:10: steps must be an integer from 1 to 10000")
    r = run("check", "--size", "tiny", "--steps", "10001", "--golden-dir", tmp_path / "g")
    one_line_error(r, "--steps", "steps must be an integer from 1 to 10000")


# ---- one axis of 100,000 seeds ---------------------------------------------------------

def test_one_axis_of_a_hundred_thousand_seeds_lists(tmp_path):
    seeds = ", ".join(str(i) for i in range(100000))
    m = write(tmp_path / "m.toml", AXES + f'policies = ["fp32"]\nseeds = [{seeds}]\n')
    r = run("list", m, "--filter", "seed=99999", "--json", "-")
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    assert listed["matrix_cells"] == 100000
    assert [c["seed"] for c in listed["cells"]] == [99999]
    dup = write(tmp_path / "dup.toml", AXES + f'policies = ["fp32"]\nseeds = [{seeds}, 5]\n')
    one_line_error(run("list", dup), f"{dup}:5:", "duplicate value in axis 'seeds'")
