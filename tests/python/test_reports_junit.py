"""framegate's JUnit XML validated with xmllint against tests/data/junit.xsd (a schema
written for framegate, modeled on the Ant/Jenkins junit-10 schema), and its status
mapping read back with ElementTree."""
import os
import pathlib
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

import reports_synthetic_run as synthetic

RENDER = synthetic.render_tool()
XMLLINT = shutil.which("xmllint")
SCHEMA = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).parents[2])) / "tests/data/junit.xsd"
pytestmark = [
    pytest.mark.skipif(not RENDER or not os.path.exists(RENDER), reason="framegate_render_report not built"),
    pytest.mark.skipif(not XMLLINT, reason="xmllint missing (libxml2-utils, ci/install-deps.sh --with-extras)"),
]

EXPECTED_CHILD = {"PASS": None, "FAIL": "failure", "NONFINITE": "failure", "BROKEN_FRAMES": "failure",
                  "XPASS": "failure", "ERROR": "error", "CRASH": "error", "TIMEOUT": "error",
                  "UNRESOLVED": "error", "UNSUPPORTED": "skipped", "XFAIL": "skipped"}


@pytest.fixture(scope="module")
def junit(tmp_path_factory):
    root = tmp_path_factory.mktemp("junit")
    path = root / "junit.xml"
    r = subprocess.run([RENDER, str(synthetic.write_run(root / "run")), "--junit", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return path


def validate(path):
    return subprocess.run([XMLLINT, "--noout", "--schema", str(SCHEMA), str(path)],
                          capture_output=True, text=True)


def test_junit_validates_against_the_schema(junit):
    r = validate(junit)
    assert r.returncode == 0, r.stderr
    assert "validates" in r.stderr


def test_schema_rejects_what_ci_reporters_would_choke_on(junit, tmp_path):
    text = junit.read_text()
    broken = {
        "no classname": text.replace('classname="reference:tiny.cpu"', "", 1),
        "time not a number": text.replace('time="1.220000"', 'time="nan"', 1),
        "failure and skipped": text.replace("<failure ", "<skipped/><failure ", 1),
        "unknown element": text.replace("<properties>", "<props/><properties>", 1),
        "negative count": text.replace('failures="', 'failures="-', 1),
    }
    for what, bad in broken.items():
        assert bad != text, what
        path = tmp_path / "bad.xml"
        path.write_text(bad)
        assert validate(path).returncode != 0, what


def test_statuses_map_to_failure_error_skipped(junit):
    suites = ET.parse(junit).getroot()
    assert suites.tag == "testsuites"
    cases = suites.findall("testsuite/testcase")
    assert len(cases) == 10
    counts = {"failure": 0, "error": 0, "skipped": 0}
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.findall("properties/property")}
        status = props["status"]
        children = [c.tag for c in case if c.tag in counts]
        expected = EXPECTED_CHILD[status]
        assert children == ([expected] if expected else []), (status, children)
        if expected:
            counts[expected] += 1
        assert case.get("classname") == f"{props['pipeline']}.{props['device']}"
        assert case.get("name") == f"{props['policy']} seed=0"
    assert {k: int(suites.get(k + ("s" if k != "skipped" else ""))) for k in counts} == counts
    assert counts == {"failure": 4, "error": 3, "skipped": 1}


def test_properties_carry_device_policy_and_metrics(junit):
    suites = ET.parse(junit).getroot()
    fail = next(c for c in suites.iter("testcase") if c.get("name") == "bf16 seed=0")
    props = {p.get("name"): p.get("value") for p in fail.findall("properties/property")}
    assert props["device"] == "cpu" and props["policy"] == "bf16"
    assert 15 < float(props["min_psnr"]) < 20
    assert float(fail.get("time")) == pytest.approx(1.22)
    failure = fail.find("failure")
    assert failure.get("message") == "min_psnr 16.5 < 30" and failure.get("type") == "FAIL"
    assert "repro: framegate check --size tiny --device cpu --policy 'bf16' --seed 0" in failure.text
    hostile = next(c for c in suites.iter("testcase") if "alert" in c.get("name"))
    assert hostile.get("name") == "<script>alert('policy')</script> seed=0"  # escaped, read back intact
    run_props = {p.get("name"): p.get("value") for p in suites.findall("testsuite/properties/property")}
    assert run_props["git_sha"] == "e93dd37abcde" and run_props["device.cuda:0"] == "NVIDIA H100"
