"""The HTML report of a synthetic run (PASS, FAIL, NONFINITE, BROKEN_FRAMES, ERROR, ...)
rendered by framegate_render_report and opened in headless Chromium.

Chromium is driven over the DevTools protocol on --remote-debugging-pipe (fds 3 and 4,
NUL-terminated JSON), with the standard library only. That gives what a screenshot
alone cannot: every console message and exception, every network request the page
makes, and whether each <img> decoded.
"""
import base64
import fcntl
import io
import json
import os
import pathlib
import re
import select
import shutil
import subprocess
import tempfile
import time

import numpy as np
import pytest

import reports_synthetic_run as synthetic

RENDER = synthetic.render_tool()
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(not RENDER or not os.path.exists(RENDER),
                                reason="framegate_render_report not built / FRAMEGATE_BIN not set")

# StatusColour() in reports/run_summary.cc, as RGB.
STATUS_RGB = {"PASS": (0x2E, 0x7D, 0x32), "FAIL": (0xC6, 0x28, 0x28), "NONFINITE": (0x6A, 0x1B, 0x9A),
              "BROKEN_FRAMES": (0xAD, 0x14, 0x57), "ERROR": (0xB7, 0x1C, 0x1C)}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("html_report")
    run_json = synthetic.write_run(root / "run")
    out = root / "html"
    r = subprocess.run([RENDER, str(run_json), "--html", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out, json.loads(run_json.read_text())


def cell_page(out, run, status):
    cell = next(c for c in run["cells"] if c["status"] == status)
    return out / "cells" / f"{cell['cell_id']}.html", cell


def test_report_is_self_contained_and_escaped(report):
    out, run = report
    pages = list(out.rglob("*.html"))
    assert len(pages) == 1 + len(run["cells"])
    for page in pages:
        text = page.read_text()
        assert not re.search(r"(?i)https?://|//[a-z0-9.-]+\.[a-z]{2,}/", text), page
        assert "<script" not in text.lower() and "<link" not in text.lower(), page
        assert "url(" not in text and "@import" not in text, page
        for src in re.findall(r'src="([^"]+)"', text):
            assert (page.parent / src).is_file(), f"{page}: missing {src}"
    index = (out / "index.html").read_text()
    assert "&lt;script&gt;alert(&#39;policy&#39;)&lt;/script&gt;" in index
    assert "model:&lt;script&gt;alert(&quot;model&quot;)&lt;script&gt;" in index
    assert "matrix/&lt;b&gt;nightly&lt;/b&gt;.toml" in index and "Intel Xeon &lt;i&gt;" in index
    for status in STATUS_RGB:
        assert f'data-status="{status}"' in index


def test_cell_pages_have_frames_or_the_reason(report):
    out, run = report
    page, cell = cell_page(out, run, "FAIL")
    text = page.read_text()
    for kind in ("golden", "candidate", "diff"):
        assert text.count(f'src="{cell["cell_id"]}/{kind}_') == synthetic.T
    assert "PSNR per frame" in text and "<svg" in text
    page, cell = cell_page(out, run, "NONFINITE")
    text = page.read_text()
    assert "step 3 in blocks.0.spatial_attn.logits" in text
    assert "inf dB" not in text, "a NaN frame must not show a perfect PSNR"
    page, cell = cell_page(out, run, "ERROR")
    text = page.read_text()
    assert "<img" not in text and "No frames: ERROR dtype_mismatch" in text


def above_9(fd):
    """Moves fd above 9, so that placing it on 3 or 4 in the child cannot clobber another."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class DevTools:
    """A headless Chromium driven over --remote-debugging-pipe."""

    def __init__(self, width=1400, height=1000):
        self.profile = tempfile.mkdtemp(prefix="fg_chromium_")
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        to_r, from_w = above_9(to_r), above_9(from_w)

        def wire_fds():  # the browser reads commands on fd 3 and answers on fd 4
            os.dup2(to_r, 3)  # dup2 leaves close-on-exec off on 3 and 4
            os.dup2(from_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", "--no-first-run", "--disable-extensions",
             "--disable-background-networking", "--proxy-server=127.0.0.1:9", "about:blank"],
            preexec_fn=wire_fds, close_fds=False, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.buffer, self.next_id, self.events = b"", 0, []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_r], [], [], left)[0]:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=False, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self.next_id:
                assert "error" not in answer, answer
                return answer["result"]
            self.events.append(answer)

    def open(self, url, timeout=30):
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._read_message(deadline))

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        assert "exceptionDetails" not in result, result
        return result["result"]["value"]

    def screenshot(self):
        return base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"])

    def console_errors(self):
        errors = []
        for e in self.events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(p)
            elif e.get("method") == "Runtime.exceptionThrown":
                errors.append(p)
            elif e.get("method") == "Log.entryAdded" and p["entry"]["level"] == "error":
                errors.append(p["entry"])
        return errors

    def requests(self):
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - the browser may already be gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_w)
        os.close(self.from_r)
        shutil.rmtree(self.profile, ignore_errors=True)


def decode_png(data):
    import matplotlib.image
    pixels = matplotlib.image.imread(io.BytesIO(data), format="png")  # float [H, W, 3|4] in [0, 1]
    return np.round(pixels[..., :3] * 255).astype(np.int32)


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM:
        pytest.skip("chromium is not installed (ci/install-deps.sh --with-extras)")
    devtools = DevTools()
    yield devtools
    devtools.close()


def test_index_renders_the_coloured_grid_offline(report, browser):
    out, run = report
    browser.open((out / "index.html").as_uri())
    assert browser.console_errors() == []
    requests = browser.requests()
    assert requests and all(u.startswith("file://") for u in requests), requests
    cells = browser.evaluate("""[...document.querySelectorAll('table.grid td.cell')].map(td => {
        const r = td.getBoundingClientRect();
        return [td.dataset.status, Math.round(r.left), Math.round(r.top), Math.round(r.width)]; })""")
    assert sorted(c[0] for c in cells) == sorted(c["status"] for c in run["cells"])
    pixels = decode_png(browser.screenshot())
    assert pixels.std() > 20, "the screenshot is blank"
    if os.environ.get("FRAMEGATE_REPORT_SCREENSHOT"):
        pathlib.Path(os.environ["FRAMEGATE_REPORT_SCREENSHOT"]).write_bytes(browser.screenshot())
    checked = set()
    for status, left, top, width in cells:
        if status not in STATUS_RGB or left + width > pixels.shape[1] or top + 4 > pixels.shape[0]:
            continue
        corner = pixels[top + 3, left + 3]
        assert np.abs(corner - STATUS_RGB[status]).max() <= 2, (status, corner.tolist())
        checked.add(status)
    assert checked == set(STATUS_RGB), f"grid cells seen in the screenshot: {checked}"


def test_cell_page_shows_golden_candidate_and_difference(report, browser):
    out, run = report
    for status in ("FAIL", "NONFINITE", "BROKEN_FRAMES", "PASS"):
        page, cell = cell_page(out, run, status)
        browser.open(page.as_uri())
        assert browser.console_errors() == [], status
        assert all(u.startswith("file://") for u in browser.requests())
        images = browser.evaluate(
            "[...document.images].map(i => [i.getAttribute('src'), i.complete, i.naturalWidth, i.naturalHeight])")
        assert len(images) == 3 * synthetic.T, status
        assert all(done and w == synthetic.W and h == synthetic.H for _, done, w, h in images), images
        assert browser.evaluate("document.querySelectorAll('svg.chart').length") >= 2
    pixels = decode_png(browser.screenshot())
    assert pixels.std() > 20


def test_error_page_shows_the_reason_in_the_browser(report, browser):
    out, run = report
    page, cell = cell_page(out, run, "ERROR")
    browser.open(page.as_uri())
    assert browser.console_errors() == []
    text = browser.evaluate("document.body.innerText")
    assert "No frames: ERROR dtype_mismatch: expected scalar type Float but found Half" in text
    assert browser.evaluate("document.images.length") == 0


def test_bad_run_json_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "run.json"
    run = json.loads(synthetic.write_run(tmp_path / "run").read_text())
    run["cells"][3]["status"] = "MAYBE"
    bad.write_text(json.dumps(run))
    r = subprocess.run([RENDER, str(bad), "--html", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1
    assert f"{bad}: cells[3]: unknown status 'MAYBE'" in r.stderr
    assert not (tmp_path / "out").exists()
