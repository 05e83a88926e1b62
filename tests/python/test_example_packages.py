"""The example model packages (pipelines/examples/make_example_packages.py): built by the
script into a temporary folder, scripted and traced, and checked in Python with torch: they
load, run the contract's forward, fail where and how their README says (the C++ harness is
not run here)."""
import math
import pathlib
import subprocess
import sys
import tomllib

import pytest
import torch

EXAMPLES_DIR = pathlib.Path(__file__).resolve().parents[2] / "pipelines" / "examples"
SCRIPT = EXAMPLES_DIR / "make_example_packages.py"
sys.path.insert(0, str(EXAMPLES_DIR))

import make_example_packages as mk  # noqa: E402

FP16_MAX = 65504.0
F1_ERROR = "mat1 and mat2 must have the same dtype"
# LibTorch 1.13's text; 2.6 checks the conv's bias first.
F4_ERROR = (r"expected scalar type Float but found BFloat16"
            r"|Input type \(float\) and bias type \(c10::BFloat16\) should be the same")
FAILURE_STARTS = {  # README line "Failure starts in: `PATH`, op `OP`"
    "f1-time-embed": ("denoiser.embed.time_mlp.0", "aten::linear"),
    "f4-input-fp32": ("denoiser.conv_in", "aten::conv3d"),
    "f3-ff-overflow": ("denoiser.blocks.1.ff.0", "aten::linear"),
    "nan-in-body": ("denoiser.blocks.0.attn", "aten::log"),
    "f2-accumulation": ("denoiser.blocks.0.attn", "aten::bmm"),
}


def _build(out: pathlib.Path, *args: str) -> pathlib.Path:
    subprocess.run([sys.executable, str(SCRIPT), str(out), *args], check=True,
                   capture_output=True, text=True, timeout=120)
    return out


@pytest.fixture(scope="module")
def scripted(tmp_path_factory) -> pathlib.Path:
    return _build(tmp_path_factory.mktemp("scripted"))


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> pathlib.Path:
    return _build(tmp_path_factory.mktemp("traced"), "--traced")


def _load(root: pathlib.Path, name: str):
    den = torch.jit.load(str(root / name / "denoiser.pt"), map_location="cpu").eval()
    dec = torch.jit.load(str(root / name / "decoder.pt"), map_location="cpu").eval()
    return den, dec


def _contract_inputs(dtype=torch.float32):
    x, t, cond = mk.example_inputs(dtype=dtype)
    assert t.dtype == torch.float32 and float(t[0]) == 999.0
    return x, t, cond


def _block_calls(module) -> list:
    """The class types of the Block submodules called (prim::CallMethod) by forward."""
    types = []
    for node in module.graph.nodes():
        if node.kind() == "prim::CallMethod":
            callee = str(next(node.inputs()).type())
            if callee.endswith(".Block"):
                types.append(callee)
    return types


def test_every_package_is_written_with_its_manifest_and_readme(scripted):
    for name in mk.NAMES:
        folder = scripted / name
        assert sorted(p.name for p in folder.iterdir()) == [
            "README.md", "decoder.pt", "denoiser.pt", "model.toml"]
        manifest = tomllib.loads((folder / "model.toml").read_text())
        assert manifest["name"] == f"example-{name}"
        assert manifest["latent"] == {"channels": mk.CHANNELS, "frames": mk.FRAMES,
                                      "height": mk.HEIGHT, "width": mk.WIDTH}
        assert manifest["cond"] == {"tokens": mk.TOKENS, "dim": mk.DIM}
        assert manifest["sampler"]["kind"] in ("ddim", "euler")
        readme = (folder / "README.md").read_text()
        assert readme.startswith(f"# {name}\n")
        for word in ("fp32", "bf16", "fp16-emulated"):
            assert word in readme
        if name in FAILURE_STARTS:
            path, op = FAILURE_STARTS[name]
            assert f"Failure starts in: `{path}`, op `{op}`" in readme


def test_same_files_every_run_whichever_packages_are_asked_for(scripted, tmp_path):
    again = _build(tmp_path / "again", "--only", "nan-in-body,clean")
    assert sorted(p.name for p in again.iterdir()) == ["clean", "nan-in-body"]
    for name in ("clean", "nan-in-body"):
        for part in ("denoiser.pt", "decoder.pt", "model.toml", "README.md"):
            assert (again / name / part).read_bytes() == (scripted / name / part).read_bytes()


def test_unknown_package_is_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        mk.main([str(tmp_path), "--only", "clean,nope"])
    assert exit_info.value.code == 2 and "unknown package(s) nope" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("form", ["scripted", "traced"])
def test_fp32_forward_follows_the_contract(form, request):
    root = request.getfixturevalue(form)
    x, t, cond = _contract_inputs()
    for name in mk.NAMES:
        den, dec = _load(root, name)
        eager, _ = mk.build_eager(name)
        with torch.no_grad():
            eps = den(x, t, cond)
            frames = dec(eps)
            batch2 = den(*mk.example_inputs(batch=2, seed=3))  # the CFG batch
            reference = eager(x, t, cond)
        assert eps.shape == x.shape and eps.dtype == torch.float32
        assert batch2.shape == (2,) + tuple(x.shape[1:])
        assert frames.shape == (1, 3, mk.FRAMES, 2 * mk.HEIGHT, 2 * mk.WIDTH)
        assert torch.allclose(eps, reference, atol=1e-5, equal_nan=True), name
        if name == "nan-in-body":
            assert torch.isnan(eps).all() and torch.isnan(frames).all()
        else:
            assert torch.isfinite(eps).all(), name
            assert float(eps.abs().max()) < 10.0, name
            assert torch.isfinite(frames).all() and float(frames.abs().max()) <= 1.0, name


@pytest.mark.parametrize("form", ["scripted", "traced"])
def test_bf16_fails_only_where_the_field_reports_say(form, request):
    root = request.getfixturevalue(form)
    x, t, cond = _contract_inputs(torch.bfloat16)
    for name in mk.NAMES:
        den, dec = _load(root, name)
        den.to(torch.bfloat16)
        dec.to(torch.bfloat16)
        expected = {"f1-time-embed": F1_ERROR, "f4-input-fp32": F4_ERROR}.get(name)
        if expected:
            with pytest.raises(RuntimeError, match=expected):
                den(x, t, cond)
            continue
        with torch.no_grad():
            eps = den(x, t, cond)
            frames = dec(eps)
        assert eps.dtype == torch.bfloat16 and frames.dtype == torch.bfloat16
        assert bool(torch.isfinite(eps).all()) == (name != "nan-in-body"), name


def test_scripted_blocks_are_one_class_called_through_call_method(scripted):
    for name in mk.NAMES:
        den, _ = _load(scripted, name)
        b0, b1 = getattr(den.blocks, "0"), getattr(den.blocks, "1")
        assert b0._c._type() == b1._c._type(), name
        calls = _block_calls(den)
        assert len(calls) == 2 and calls[0] == calls[1], name
        # The nested submodules are calls too (what localises a failure by module path).
        assert any(n.kind() == "prim::CallMethod" for n in b0.graph.nodes())
        assert any(n.kind() == "prim::CallMethod" for n in b0.attn.graph.nodes())


def test_traced_blocks_keep_call_method(traced):
    for name in mk.NAMES:
        den, _ = _load(traced, name)
        # Tracing gives each submodule its own class type; the calls stay.
        assert len(_block_calls(den)) == 2, name
        b0 = getattr(den.blocks, "0")
        assert any(n.kind() == "prim::CallMethod" for n in b0.graph.nodes())


def test_clean_stays_small_when_every_op_is_rounded_to_fp16():
    den, dec = mk.build_eager("clean")
    first, peaks, out = mk.localise_nonfinite(den, _contract_inputs(), round_fp16=True)
    assert first is None and torch.isfinite(out).all()
    # The timestep (999) and its sinusoid arguments run in denoiser.embed; all else is small.
    assert max(v for k, v in peaks.items() if k != "denoiser.embed") < 20.0
    maxima, _ = mk.module_output_maxima(den, _contract_inputs())
    assert max(maxima.values()) < 20.0
    first, _, frames = mk.localise_nonfinite(dec, (out,), root="decoder", round_fp16=True)
    assert first is None and torch.isfinite(frames).all()


def test_f3_overflow_is_in_blocks_1_ff_0_only():
    den, _ = mk.build_eager("f3-ff-overflow")
    inputs = _contract_inputs()
    maxima, out = mk.module_output_maxima(den, inputs)
    assert 8.5e4 < maxima["blocks.1.ff.0"] < 9.5e4
    others = {k: v for k, v in maxima.items() if k != "blocks.1.ff.0"}
    assert max(others.values()) < 6e4 and max(others.values()) < 100.0
    assert maxima["blocks.0.ff.0"] < 100.0  # same class, default weights
    assert torch.isfinite(out).all()
    # Rounded to fp16 (module outputs, then every op): -Inf, starting in blocks.1.ff.0.
    rounded, out16 = mk.module_output_maxima(den, inputs, round_fp16=True)
    assert not torch.isfinite(out16).all()
    assert [k for k, v in rounded.items() if not math.isfinite(v)][0] == "blocks.1.ff.0"
    first, _, _ = mk.localise_nonfinite(den, inputs, round_fp16=True)
    assert first == ("denoiser.blocks.1.ff.0", "linear")
    # bf16 keeps the fp32 exponent range.
    first, _, out_bf16 = mk.localise_nonfinite(den.to(torch.bfloat16),
                                               _contract_inputs(torch.bfloat16))
    assert first is None and torch.isfinite(out_bf16).all()


def test_nan_in_body_comes_from_log_in_blocks_0_attn():
    den, _ = mk.build_eager("nan-in-body")
    for inputs in (_contract_inputs(), mk.example_inputs(seed=11),
                   (torch.zeros(1, mk.CHANNELS, mk.FRAMES, mk.HEIGHT, mk.WIDTH),
                    torch.full([1], 999.0), torch.zeros(1, mk.TOKENS, mk.DIM))):
        first, _, out = mk.localise_nonfinite(den, inputs)
        assert first == ("denoiser.blocks.0.attn", "log")
        assert torch.isnan(out).all()
    # At module boundaries it shows first at blocks.0.attn.to_out (to_q/k/v are finite).
    maxima, _ = mk.module_output_maxima(den, _contract_inputs())
    nonfinite = [k for k, v in maxima.items() if not math.isfinite(v)]
    assert nonfinite[0] == "blocks.0.attn.to_out"
    assert all(math.isfinite(maxima[f"blocks.0.attn.{m}"]) for m in ("to_q", "to_k", "to_v"))


def test_f2_overflows_with_fp16_accumulation_only():
    den, _ = mk.build_eager("f2-accumulation")
    inputs = _contract_inputs()
    q, k, scale = mk.attn_qk(den, inputs, block=0)
    assert q.shape[-1] == k.shape[-1] == 256  # the bmm's inner (reduction) dimension
    kt = k.transpose(1, 2)
    logits32 = torch.bmm(q, kt)
    assert torch.isfinite(logits32).all() and float(logits32.abs().max()) < 100.0
    assert mk.max_running_sum(q, kt) > FP16_MAX        # partial sums past the fp16 range
    logits16 = mk.fp16_accumulated_bmm(q, kt)           # running sum rounded per 32 products
    assert torch.isinf(logits16).all()
    assert torch.isnan(torch.softmax(logits16.float() * scale, dim=-1)).all()
    # fp16 inputs with fp32 accumulation are fine: the overflow is the accumulation's.
    assert torch.isfinite(torch.bmm(q.half().float(), kt.half().float())).all()
    # Rounding every activation to fp16 does not overflow: all of them stay small.
    first, peaks, out = mk.localise_nonfinite(den, inputs, round_fp16=True)
    assert first is None and torch.isfinite(out).all()
    assert max(v for p, v in peaks.items() if p != "denoiser.embed") < 100.0
    maxima, out16 = mk.module_output_maxima(den, inputs, round_fp16=True)
    assert max(maxima.values()) < 100.0 and torch.isfinite(out16).all()
    # Block 1 (same class) is an ordinary attention.
    q1, k1, _ = mk.attn_qk(den, inputs, block=1)
    assert torch.isfinite(mk.fp16_accumulated_bmm(q1, k1.transpose(1, 2))).all()
