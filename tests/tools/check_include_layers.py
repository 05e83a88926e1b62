#!/usr/bin/python3
"""Fails when a source includes from a folder above its own (docs/layout.md).

Includes run one way, top to bottom:
  cli/                                   the command; may include everything below
  runners/, reports/                     reports/ includes neither runners/ nor pipelines/
  pipelines/, matrix/, golden/           matrix/ and golden/ may include pipelines/
  checks/, store/                        may include the vocabulary (harness/*.h) only
  harness/                               the vocabulary: includes only itself
bench/, fuzz/ and tests/ are drivers and may include anything.
Usage: check_include_layers.py [REPO_ROOT]; prints every forbidden include, exit 1 if any.
"""
import pathlib
import re
import sys

# Folder of a source -> the folders its project includes may come from.
ALLOWED = {
    "harness": {"harness"},
    "checks": {"harness", "checks"},
    "store": {"harness", "store"},
    "pipelines": {"harness", "checks", "pipelines"},
    "golden": {"harness", "checks", "pipelines", "golden"},
    "matrix": {"harness", "checks", "pipelines", "matrix"},
    "runners": {"harness", "checks", "store", "pipelines", "matrix", "golden", "runners"},
    "reports": {"harness", "checks", "store", "reports"},
}
PROJECT_ROOTS = ("harness", "checks", "store", "pipelines", "golden", "matrix", "runners", "reports", "cli")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def layer_of(path: pathlib.PurePosixPath) -> str:
    return path.parts[0]


def violations(root: pathlib.Path):
    for source in sorted(root.rglob("*")):
        if source.suffix not in (".h", ".cc", ".in") or not source.is_file():
            continue
        rel = pathlib.PurePosixPath(source.relative_to(root).as_posix())
        layer = layer_of(rel)
        if layer not in ALLOWED:
            continue  # cli/ (top) and the drivers
        text = source.read_text(errors="replace")
        for match in INCLUDE.finditer(text):
            target = pathlib.PurePosixPath(match.group(1))
            if target.parts[0] not in PROJECT_ROOTS:
                continue  # a generated header or a library's
            target_layer = layer_of(target)
            if target_layer not in ALLOWED[layer]:
                line = text.count("\n", 0, match.start()) + 1
                yield f"{rel}:{line}: {layer}/ may not include {match.group(1)} ({target_layer}/ is not below it)"


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
    found = list(violations(root))
    for v in found:
        print(v)
    print(f"include layers: {len(found)} forbidden include(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
