"""Bad input through the real `framegate` binary (issue 8): model packages, goldens,
`framegate metrics` inputs, databases and command-line arguments. Each must give exit
code 2 and ONE stderr line "framegate: error: ..." naming the file and the problem, and
leave stored data (databases, goldens) as it was.
"""
import json
import os
import pathlib
import shutil
import sqlite3
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

FRAMEGATE = os.environ.get("FRAMEGATE_BIN")
SOURCE = pathlib.Path(os.environ.get("FRAMEGATE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
pytestmark = pytest.mark.skipif(not FRAMEGATE, reason="FRAMEGATE_BIN is not set (run through ctest)")
sys.path.insert(0, str(SOURCE / "pipelines" / "crosscheck"))
import make_crosscheck_package as pkg  # noqa: E402
import torch  # noqa: E402

FAST = ("--steps", "2", "--threads", "1")


def run(*args, cwd=None):
    return subprocess.run([FRAMEGATE, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def one_line_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("framegate: error: ") and r.stderr.count("\n") == 1, r.stderr
    for fragment in fragments:
        assert str(fragment) in r.stderr, (fragment, r.stderr)


def tree(d):
    return sorted(str(p.relative_to(d)) for p in pathlib.Path(d).rglob("*"))


# ---- model packages: framegate check --model DIR --golden-dir TMP ----------------------

@pytest.fixture(scope="module")
def good_package(tmp_path_factory):
    return pathlib.Path(pkg.write_package(str(tmp_path_factory.mktemp("pkg") / "good")))


def copy_package(good, tmp_path, name="pkg"):
    d = tmp_path / name
    shutil.copytree(good, d)
    return d


def check_model(d, tmp_path):
    return run("check", "--model", d, "--golden-dir", tmp_path / "goldens", *FAST)


class NoCondDenoiser(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:  # wrong: no t, no cond
        return x


class HalfFramesDenoiser(torch.nn.Module):
    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        return x[:, :, : x.shape[2] // 2]  # wrong shape: half the frames


class Float64Decoder(torch.nn.Module):
    def forward(self, z: torch.Tensor) -> torch.Tensor:  # wrong dtype: float64 RGB
        rgb = torch.zeros(z.shape[0], 3, z.shape[2], z.shape[3] * 2, z.shape[4] * 2)
        return rgb.to(torch.float64)


def test_package_with_a_missing_file(good_package, tmp_path):
    d = copy_package(good_package, tmp_path)
    (d / "decoder.pt").unlink()
    one_line_error(check_model(d, tmp_path), d / "decoder.pt")


def test_package_without_model_toml(good_package, tmp_path):
    d = copy_package(good_package, tmp_path)
    (d / "model.toml").unlink()
    one_line_error(check_model(d, tmp_path), d / "model.toml")


def test_package_model_toml_missing_a_key(good_package, tmp_path):
    d = copy_package(good_package, tmp_path)
    text = (d / "model.toml").read_text()
    (d / "model.toml").write_text("\n".join(l for l in text.splitlines() if not l.startswith("dim")))
    one_line_error(check_model(d, tmp_path), "model.toml", "dim")


def test_package_file_that_is_not_torchscript(good_package, tmp_path):
    d = copy_package(good_package, tmp_path)
    (d / "denoiser.pt").write_text("def forward(x): return x\n")
    one_line_error(check_model(d, tmp_path), d / "denoiser.pt")


def test_package_truncated_pt(good_package, tmp_path):
    d = copy_package(good_package, tmp_path)
    data = (d / "decoder.pt").read_bytes()
    (d / "decoder.pt").write_bytes(data[: len(data) // 2])
    one_line_error(check_model(d, tmp_path), d / "decoder.pt")


def test_package_forward_with_the_wrong_signature(good_package, tmp_path):
    d = copy_package(good_package, tmp_path)
    torch.jit.script(NoCondDenoiser()).save(str(d / "denoiser.pt"))
    one_line_error(check_model(d, tmp_path), d / "denoiser.pt")


def test_package_output_of_the_wrong_shape(good_package, tmp_path):
    d = copy_package(good_package, tmp_path)
    torch.jit.script(HalfFramesDenoiser()).save(str(d / "denoiser.pt"))
    one_line_error(check_model(d, tmp_path), d / "denoiser.pt", "shape")


def test_package_output_of_the_wrong_dtype(good_package, tmp_path):
    d = copy_package(good_package, tmp_path)
    torch.jit.script(Float64Decoder()).save(str(d / "decoder.pt"))
    one_line_error(check_model(d, tmp_path), d / "decoder.pt", "dtype")


def test_model_name_with_dotdot_cannot_escape_the_golden_folder(good_package, tmp_path):
    d = copy_package(good_package, tmp_path, name="pkg")
    text = (d / "model.toml").read_text().splitlines()
    text[0] = 'name = "../../escaped"'
    (d / "model.toml").write_text("\n".join(text) + "\n")
    work = tmp_path / "work"
    goldens = work / "a" / "b" / "goldens"
    goldens.mkdir(parents=True)
    before = tree(tmp_path)
    r = run("golden", "make", "--model", d, "--golden-dir", goldens, *FAST)
    # Either refused in one line or written inside the golden folder, never beside it.
    if r.returncode != 0:
        one_line_error(r)
    new = [p for p in tree(tmp_path) if p not in before]
    assert all(p.startswith("work/a/b/goldens/") for p in new), new
    assert not list(tmp_path.rglob("escaped*"))
    artifacts = work / "artifacts"
    r = run("check", "--model", d, "--golden-dir", goldens, "--artifacts", artifacts, *FAST)
    assert r.returncode in (0, 1, 2), r.stderr
    assert not list(tmp_path.rglob("escaped*"))
    outside = [p for p in tree(tmp_path) if p not in before and not p.startswith("work/a/b/goldens")
               and not p.startswith("work/artifacts")]
    assert outside == [], outside


# ---- goldens: framegate check --size tiny --golden-dir G -------------------------------

@pytest.fixture(scope="module")
def golden_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("golden")
    r = run("golden", "make", "--size", "tiny", "--seed", "0", *FAST, "--golden-dir", d)
    assert r.returncode == 0, r.stderr
    return d


def damaged_golden(golden_dir, tmp_path, edit, fix_manifest=True):
    """A copy of the golden folder whose one golden file is edit(bytes); the manifest's
    sha256 is updated to match unless fix_manifest is False."""
    d = tmp_path / "goldens"
    shutil.copytree(golden_dir, d)
    (f,) = d.glob("*.safetensors")
    f.write_bytes(edit(f.read_bytes()))
    if fix_manifest:
        import hashlib
        manifest = json.loads((d / "MANIFEST.json").read_text())
        manifest["goldens"][f.name]["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
        (d / "MANIFEST.json").write_text(json.dumps(manifest))
    return d, f


def edit_header(data, change):
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    payload = data[8 + n:]
    payload = change(header, payload)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + payload


def check_golden(d):
    return run("check", "--size", "tiny", "--seed", "0", *FAST, "--golden-dir", d)


def test_golden_truncated(golden_dir, tmp_path):
    d, f = damaged_golden(golden_dir, tmp_path, lambda b: b[: len(b) - 1000])
    one_line_error(check_golden(d), f.name, "truncated")


def test_golden_wrong_magic(golden_dir, tmp_path):
    def change(h, p):
        h["__metadata__"]["format"] = "not-a-golden"
        return p
    d, f = damaged_golden(golden_dir, tmp_path, lambda b: edit_header(b, change))
    one_line_error(check_golden(d), f.name, "not a framegate golden")


def test_golden_newer_format_version(golden_dir, tmp_path):
    def change(h, p):
        h["__metadata__"]["format_version"] = "7"
        return p
    d, f = damaged_golden(golden_dir, tmp_path, lambda b: edit_header(b, change))
    one_line_error(check_golden(d), f.name, "version 7 is newer")


def test_golden_hash_mismatch_with_the_manifest(golden_dir, tmp_path):
    def flip(b):
        b = bytearray(b)
        b[-5] ^= 0x40
        return bytes(b)
    d, f = damaged_golden(golden_dir, tmp_path, flip, fix_manifest=False)
    before = f.read_bytes()
    one_line_error(check_golden(d), f.name, "sha256")
    assert f.read_bytes() == before  # the damaged golden is reported, never rewritten


def test_golden_shape_mismatch_with_the_config(golden_dir, tmp_path):
    def change(h, p):
        t, hh, w, c = h["frames"]["shape"]
        frame_bytes = hh * w * c * 4
        h["frames"]["shape"] = [t - 1, hh, w, c]
        end = h["frames"]["data_offsets"][1] - frame_bytes
        h["frames"]["data_offsets"][1] = end
        lat = h["latents"]["data_offsets"]
        h["latents"]["data_offsets"] = [lat[0] - frame_bytes, lat[1] - frame_bytes]
        return p[:end] + p[end + frame_bytes:]
    d, f = damaged_golden(golden_dir, tmp_path, lambda b: edit_header(b, change))
    one_line_error(check_golden(d), f.name, "shape")


# ---- framegate metrics inputs ----------------------------------------------------------

def frames(seed=0, shape=(2, 8, 8, 3)):
    return np.random.RandomState(seed).rand(*shape).astype(np.float32)


def test_metrics_bad_header(tmp_path):
    good, bad = tmp_path / "good.npy", tmp_path / "bad.npy"
    np.save(good, frames())
    data = bytearray(good.read_bytes())
    data[10:20] = b"garbage!!!"
    bad.write_bytes(bytes(data))
    one_line_error(run("metrics", good, bad), bad)


def test_metrics_unsupported_dtype(tmp_path):
    good, bad = tmp_path / "good.npy", tmp_path / "int16.npy"
    np.save(good, frames())
    np.save(bad, (frames() * 100).astype(np.int16))
    one_line_error(run("metrics", good, bad), bad, "dtype")


def test_metrics_mismatched_shapes(tmp_path):
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, frames())
    np.save(b, frames(1, (3, 8, 8, 3)))
    one_line_error(run("metrics", a, b), "shape")


def test_metrics_empty_folder(tmp_path):
    a = tmp_path / "a.npy"
    np.save(a, frames())
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(run("metrics", a, empty), empty)


def test_metrics_missing_file(tmp_path):
    a = tmp_path / "a.npy"
    np.save(a, frames())
    one_line_error(run("metrics", a, tmp_path / "nope.npy"), tmp_path / "nope.npy")


# ---- databases: framegate db check / history -------------------------------------------

def write_db(db, run_id="r1", cells=3):
    r = run("db", "test-write", "--db", db, "--run-id", run_id, "--cells", cells, "--finish")
    assert r.returncode == 0, r.stderr


def count_cells(db):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM cells").fetchone()[0]
    finally:
        conn.close()


def cells_of(db, run_id):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT cell_id FROM cells WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
    finally:
        conn.close()


def test_db_not_a_database(tmp_path):
    db = tmp_path / "junk.db"
    db.write_bytes(b"not sqlite at all\n" * 100)
    for command in (["db", "check"], ["history", "0123456789abcdef"]):
        one_line_error(run(*command, "--db", db), db, "not a valid framegate database")
    assert db.read_bytes() == b"not sqlite at all\n" * 100


def test_db_newer_schema(tmp_path):
    db = tmp_path / "newer.db"
    write_db(db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 42")
    for command in (["db", "check"], ["history", "0123456789abcdef"]):
        one_line_error(run(*command, "--db", db), db, "newer")
    assert count_cells(db) == 3


def test_db_locked_by_another_process(tmp_path):
    """A writer that holds the lock past the busy timeout (30 s): one line, exit 2, nothing
    lost; readers are not blocked (WAL)."""
    db = tmp_path / "locked.db"
    write_db(db)
    holder = subprocess.Popen(
        ["/usr/bin/python3", "-c",
         "import sqlite3, sys, time\n"
         "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "c.execute('BEGIN EXCLUSIVE')\n"
         "print('locked', flush=True)\n"
         "time.sleep(120)\n", str(db)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        reader = run("history", "--filter", "policy=fp*", "--db", db)
        assert reader.returncode == 0, reader.stderr
        t0 = time.monotonic()
        r = run("db", "test-write", "--db", db, "--run-id", "r2", "--cells", 1, "--finish")
        waited = time.monotonic() - t0
        one_line_error(r, db, "locked")
        assert "30 s" in r.stderr
        assert waited >= 29, waited
    finally:
        holder.kill()
        holder.wait()
    assert count_cells(db) == 3
    assert run("db", "check", "--db", db).returncode == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_db_read_only_file_and_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "r.db"
    write_db(db)
    run("db", "check", "--db", db)  # checkpoint
    db.chmod(0o444)
    folder.chmod(0o555)
    try:
        r = run("db", "test-write", "--db", db, "--run-id", "r2", "--cells", 1, "--finish")
        one_line_error(r, db)
        assert run("db", "check", "--db", db).returncode in (0, 2)
    finally:
        folder.chmod(0o755)
        db.chmod(0o644)
    assert count_cells(db) == 3


def as_root(*command):
    """Runs a mount command as root (directly, or through passwordless sudo)."""
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    return subprocess.run(prefix + [str(c) for c in command], capture_output=True)


def ro_bind_mount(src, dst):
    """Mounts src read-only at dst; False if this machine does not allow it."""
    return as_root("mount", "--bind", "-o", "ro", src, dst).returncode == 0


def umount(path):
    as_root("umount", path)


def test_db_on_a_read_only_file_system(tmp_path):
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    write_db(src / "r.db")
    assert run("db", "check", "--db", src / "r.db").returncode == 0
    if not ro_bind_mount(src, mnt):
        pytest.skip("cannot mount a read-only bind mount here (not root, no passwordless sudo)")
    try:
        db = mnt / "r.db"
        r = run("db", "test-write", "--db", db, "--run-id", "r2", "--cells", 1, "--finish")
        one_line_error(r, db)
        r = run("history", "--filter", "policy=fp*", "--db", db)
        assert r.returncode == 0 or r.stderr.count("\n") == 1, r.stderr
    finally:
        umount(mnt)
    assert count_cells(src / "r.db") == 3


def test_db_on_a_full_disk(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    # 512 KiB: a new store's migrations leave ~144 KiB of WAL before the first run is
    # checkpointed (schema 10 rebuilds series_points), so 256 KiB no longer holds one run.
    if as_root("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", mnt).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (not root, no passwordless sudo)")
    try:
        as_root("chmod", "777", mnt)
        db = mnt / "full.db"
        write_db(db, cells=1)
        first_run = cells_of(db, "r1")
        r = run("db", "test-write", "--db", db, "--run-id", "big", "--cells", 2000, "--finish")
        one_line_error(r, db, "full")
        # Cells are committed one by one: the first run is intact, the second holds the
        # cells that fitted, and the file is still a sound database.
        assert cells_of(db, "r1") == first_run and len(first_run) == 1
        assert 0 < len(cells_of(db, "big")) < 2000
        r = run("db", "check", "--db", db)
        assert r.returncode == 0 and "integrity ok" in r.stdout, r.stdout + r.stderr
    finally:
        umount(mnt)


# ---- command-line arguments ------------------------------------------------------------

@pytest.mark.parametrize("args, fragment", [
    (["check", "--no-such-flag"], "--no-such-flag"),
    (["check", "--size", "huge"], "huge"),
    (["check", "--size", "tiny", "--seed", "minus-one"], "--seed"),
    (["check", "--size", "tiny", "--policy", "fp13"], "fp13"),
    (["check", "--size", "tiny", "--device", "tpu:0"], "tpu:0"),
    (["check", "--size", "tiny", "--steps", "0"], "--steps"),
    (["check", "--size", "tiny", "--sampler", "heun"], "heun"),
    (["check", "--size", "tiny", "--model", "."], "--model"),
    (["check", "--size", "tiny", "--steps", "-3"], "--steps"),
    (["metrics", "a.npy", "b.npy", "--threads", "-1"], "--threads"),
    (["metrics", "a.npy"], "CAND"),
    (["db", "check", "--db"], "--db"),
    (["no-such-command"], "no-such-command"),
])
def test_bad_command_line_arguments(tmp_path, args, fragment):
    np.save(tmp_path / "a.npy", frames())
    np.save(tmp_path / "b.npy", frames(1))
    one_line_error(run(*args, cwd=tmp_path), fragment)
