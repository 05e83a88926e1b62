#!/usr/bin/env python3
"""Writes clean packages of designs the default bounds were not fitted on: the zoo's
architectures at other widths, depths, geometries, step counts and guidance (one traced),
with the zoo's own weights and writer (pipelines/examples/make_zoo_packages.py). Run them
through bench/zoo_sweep.py: every cell must PASS, since each package is clean.

  PYTHONHASHSEED=0 /usr/bin/python3 bench/zoo_holdout.py OUT_DIR
  /usr/bin/python3 bench/zoo_sweep.py --framegate build/bin/framegate --zoo OUT_DIR --seeds 0-4
"""

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "pipelines" / "examples"))
import make_zoo_packages as zoo  # noqa: E402
import zoo_modules as zm  # noqa: E402

HOLDOUT = [
    zoo.Design("holdout-dit-wide", "DiT 64 wide, 6 blocks, 8 heads; 8 latent channels at 16x16", False,
               (8, 4, 16, 16), (6, 24), ("ddim", 10, 6.0),
               lambda g, c, **kw: zm.DiT(g, c[1], 64, 6, 8, **kw),
               lambda g, **kw: zm.GroupNormDecoder(g[0], g[1], 32, 1, **kw)),
    zoo.Design("holdout-latte-long", "Latte 48 wide, 3 pairs, 12 frames; time-mix decoder 48 wide", True,
               (4, 12, 8, 8), (4, 16), ("euler", 8, 5.0),
               lambda g, c, **kw: zm.Latte(g, c[1], 48, 3, 6, **kw),
               lambda g, **kw: zm.TimeMixDecoder(g[0], g[1], 48, **kw)),
    zoo.Design("holdout-mmdit-deep", "MM-DiT 48 wide, 5 blocks, CFG 7; causal decoder 48 wide", False,
               (4, 4, 8, 8), (8, 32), ("euler", 8, 7.0),
               lambda g, c, **kw: zm.MMDiT(g, c[0], c[1], 48, 5, 6, **kw),
               lambda g, **kw: zm.CausalDecoder(g[0], 48, **kw)),
    zoo.Design("holdout-unet3d-wide", "UNet3D 24 channels at 16x16, 8 steps, CFG 7.5", True,
               (4, 4, 16, 16), (4, 16), ("ddim", 8, 7.5),
               lambda g, c, **kw: zm.UNet3D(g, c[1], 24, **kw),
               lambda g, **kw: zm.CausalDecoder(g[0], 32, **kw)),
    zoo.Design("holdout-uvit-traced", "U-ViT 64 wide, 8 heads, 12 steps, traced", True,
               (4, 4, 8, 8), (4, 16), ("ddim", 12, 4.0),
               lambda g, c, **kw: zm.UViT(g, c[0], c[1], 64, 2, 8, **kw),
               lambda g, **kw: zm.TimeMixDecoder(g[0], g[1], 32, **kw)),
    # Blocks none of the designs above use: RMSNorm, 3D RoPE, float32 modulation, a causal
    # VAE with channel RMS norms, frame attention and a pixel-shuffle up.
    zoo.Design("holdout-wan", "Wan-style DiT 48 wide, 3 RoPE blocks, Euler CFG 5; Wan-style causal VAE",
               False, (4, 4, 8, 8), (6, 24), ("euler", 8, 5.0),
               lambda g, c, **kw: zm.WanDiT(g, c[1], 48, 3, 4, **kw),
               lambda g, **kw: zm.WanDecoder(g[0], g[1], 32, **kw)),
    zoo.Design("holdout-wan-gn-traced", "the same, traced, DDIM, a GroupNorm before conv_out", True,
               (4, 4, 8, 8), (6, 24), ("ddim", 8, 5.0),
               lambda g, c, **kw: zm.WanDiT(g, c[1], 48, 3, 4, **kw),
               lambda g, **kw: zm.WanDecoder(g[0], g[1], 32, group_norm=True, **kw)),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", help="folder the packages are written into (one folder each)")
    args = parser.parse_args()
    zoo.NAMES[:] = []
    for design in HOLDOUT:
        zoo.DESIGNS[design.name] = design
        package = zoo.Package(design.name, design.name, True, dict(zoo.ALL_PASS))
        zoo.PACKAGES.append(package)
        zoo.BY_NAME[package.name] = package
        zoo.NAMES.append(package.name)
    zoo.torch.set_num_threads(1)
    for path in zoo.write_packages(args.out_dir, zoo.NAMES):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
