"""The qualification reports (reports/qualification_report.h) rendered by
framegate_render_report from a qualification JSON: the HTML page opened in headless
Chromium (offline, no console error, each verdict in its colour), the JUnit XML validated
with xmllint against tests/data/junit.xsd, and the terminal summary."""
import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import reports_synthetic_run as synthetic
from test_reports_html import CHROMIUM, DevTools, decode_png

RENDER = synthetic.render_tool()
XMLLINT = shutil.which("xmllint")
SCHEMA = os.path.join(os.environ.get("FRAMEGATE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                      "tests", "data", "junit.xsd")
pytestmark = pytest.mark.skipif(not RENDER or not os.path.exists(RENDER), reason="framegate_render_report not built")

# The verdict colours of reports/qualification_report.cc, as RGB.
VERDICT_RGB = {"PASS": (0x2E, 0x7D, 0x32), "DEGRADED": (0xEF, 0x6C, 0x00), "FAULTY": (0xC6, 0x28, 0x28)}


def reason(kind, severity, cell="", step=None, module="", detail=""):
    return {"kind": kind, "severity": severity, "cell": cell, "step": step, "module": module, "detail": detail}


DEVICES = [
    {"device": "cpu:default", "kind": "cpu", "verdict": "PASS", "cells": 8, "repeats": 3, "seconds": 10.5,
     "reasons": []},
    {"device": "cpu:avx2", "kind": "cpu", "verdict": "DEGRADED", "cells": 8, "repeats": 3, "seconds": 11.0,
     "reasons": [reason("transient_mismatch", "DEGRADED", "reference:tiny bf16 seed 1", 4, "", "1 of 3 differs")]},
    {"device": "cpu:<avx512>", "kind": "cpu", "verdict": "FAULTY", "cells": 8, "repeats": 3, "seconds": None,
     "reasons": [reason("slow", "DEGRADED", detail="1.4x"),
                 reason("persistent_mismatch", "FAULTY", "reference:tiny fp32 seed 0", 3,
                        "blocks.<script>alert(1)</script>&0", "max_abs 0.25")]},
]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = tmp_path_factory.mktemp("qualification")
    doc = root / "qualify.json"
    doc.write_text(json.dumps({"devices": DEVICES, "verdict": "FAULTY"}))
    page, junit = root / "qualification.html", root / "qualification.xml"
    r = subprocess.run([RENDER, str(synthetic.write_run(root / "run")), "--qualification", str(doc),
                        "--qualification-html", str(page), "--qualification-junit", str(junit), "--summary"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return page, junit, r.stdout


def test_summary_and_page_content(rendered):
    page, _, stdout = rendered
    assert "cpu:<avx512>  FAULTY  (2 reasons)\n    persistent_mismatch reference:tiny fp32 seed 0 step 3" in stdout
    text = page.read_text()
    assert "<script" not in text and "blocks.&lt;script&gt;alert(1)&lt;/script&gt;&amp;0" in text
    assert "cpu:&lt;avx512&gt;" in text


def test_page_renders_each_verdict_in_its_colour_offline(rendered):
    if not CHROMIUM:
        pytest.skip("chromium is not installed (ci/install-deps.sh --with-extras)")
    page, _, _ = rendered
    browser = DevTools()
    try:
        browser.open(page.as_uri())
        assert browser.console_errors() == []
        assert all(u.startswith("file://") for u in browser.requests())
        badges = browser.evaluate("""[...document.querySelectorAll('table.devices .verdict')].map(b => {
            const r = b.getBoundingClientRect();
            return [b.dataset.verdict, Math.round(r.left), Math.round(r.top)]; })""")
        assert [b[0] for b in badges] == ["PASS", "DEGRADED", "FAULTY"]
        assert browser.evaluate("document.querySelectorAll('ul.reasons li').length") == 3
        pixels = decode_png(browser.screenshot())
        for verdict, left, top in badges:
            corner = pixels[top + 3, left + 3]
            assert np.abs(corner - VERDICT_RGB[verdict]).max() <= 2, (verdict, corner.tolist())
    finally:
        browser.close()


def test_junit_is_one_testcase_per_device_and_validates(rendered):
    _, junit, _ = rendered
    cases = ET.parse(junit).getroot().findall("./testsuite/testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("qualify", "cpu:default"), ("qualify", "cpu:avx2"), ("qualify", "cpu:<avx512>")]
    assert [c.find("failure") is not None for c in cases] == [False, True, True]
    assert cases[2].find("failure").get("type") == "FAULTY"
    assert "blocks.<script>alert(1)</script>&0" in cases[2].find("failure").text
    if not XMLLINT:
        pytest.skip("xmllint missing (libxml2-utils)")
    r = subprocess.run([XMLLINT, "--noout", "--schema", SCHEMA, str(junit)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_a_bad_qualification_json_is_one_line_exit_2(tmp_path):
    doc = tmp_path / "bad.json"
    doc.write_text(json.dumps({"devices": DEVICES, "verdict": "PASS"}))
    r = subprocess.run([RENDER, str(synthetic.write_run(tmp_path / "run")), "--qualification", str(doc),
                        "--qualification-html", str(tmp_path / "q.html")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "'verdict' is \"PASS\", the devices' worst is FAULTY" in r.stderr
    assert not (tmp_path / "q.html").exists()
