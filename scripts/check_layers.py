#!/usr/bin/env python3
"""Checks braid's layering: which layer may depend on which (docs/ARCHITECTURE.md, STYLE.md section 3.2).

Three sources are checked against one table (ALLOWED below):
  1. every `#include "<layer>/..."` in a layer folder's .h/.cc/.cu/.cuh files (sub-folders such as
     collectives/nccl/ belong to their layer);
  2. every braid::<layer> (or braid_<layer>, braid::<layer>_<backend>) named in a layer folder's CMake
     files, i.e. the DEPS of braid_add_library and any target_link_libraries;
  3. the table in docs/ARCHITECTURE.md, which must list the same edges as ALLOWED.

Usage:
  check_layers.py [ROOT]        check the tree at ROOT (default: this repository); exit 1 on a violation
  check_layers.py --self-test   build temporary trees with known violations and check that each is caught
"""
import argparse
import re
import sys
import tempfile
from pathlib import Path

# Layer -> the layers it may depend on (besides itself). Keep in sync with docs/ARCHITECTURE.md; check 3
# fails when they differ.
ALLOWED = {
    "base": set(),
    "tensor": {"base"},
    "store": {"base"},
    "autograd": {"tensor", "base"},
    "collectives": {"tensor", "store", "base"},
    "rpc": {"tensor", "store", "base"},
    "nn": {"autograd", "tensor", "base"},
    "parallel": {"nn", "autograd", "collectives", "tensor", "base"},
    "dist_autograd": {"nn", "autograd", "rpc", "tensor", "base"},
    "runtime": {"parallel", "dist_autograd", "nn", "autograd", "collectives", "rpc", "store", "tensor", "base"},
    "cli": {"runtime", "base"},
}
LAYERS = list(ALLOWED)
SOURCE_SUFFIXES = {".h", ".cc", ".cu", ".cuh"}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*["<]([A-Za-z0-9_]+)/([^">]+)[">]')
# braid::tensor, braid::collectives_nccl, braid_tensor; the word boundary keeps braid_warnings etc. out
# unless their name starts with a layer.
TARGET_RE = re.compile(r"\bbraid(?:::|_)([A-Za-z0-9_]+)")
TABLE_ROW_RE = re.compile(r"^\|\s*`([a-z_]+)`\s*\|([^|]*)\|")


def layer_of_target(name):
    """Maps a target name (after braid:: or braid_) to its layer: 'collectives_nccl' -> 'collectives'."""
    for layer in sorted(LAYERS, key=len, reverse=True):
        if name == layer or name.startswith(layer + "_"):
            return layer
    return None


def check_includes(root, layer):
    problems, count = [], 0
    for path in sorted((root / layer).rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE_RE.match(line)
            if not m or m.group(1) not in ALLOWED:
                continue  # not a braid layer (std, fmt/, CLI/, nlohmann/, ...)
            count += 1
            dep = m.group(1)
            if dep != layer and dep not in ALLOWED[layer]:
                rel = path.relative_to(root)
                problems.append(f"{rel}:{lineno}: {layer} -> {dep} (#include \"{dep}/{m.group(2)}\")")
    return problems, count


def check_cmake(root, layer):
    problems, count = [], 0
    for path in sorted((root / layer).rglob("CMakeLists.txt")):
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            code = line.split("#", 1)[0]  # CMake comments; braid's CMake files put no '#' inside strings
            for m in TARGET_RE.finditer(code):
                dep = layer_of_target(m.group(1))
                if dep is None:
                    continue  # braid_warnings, braid_sanitizers, braid_nccl_lib, ...
                count += 1
                if dep != layer and dep not in ALLOWED[layer]:
                    rel = path.relative_to(root)
                    problems.append(f"{rel}:{lineno}: {layer} -> {dep} (CMake names {m.group(0)})")
    return problems, count


def check_architecture_doc(root):
    doc = root / "docs" / "ARCHITECTURE.md"
    if not doc.exists():
        return [f"docs/ARCHITECTURE.md: missing; it must hold the table of allowed dependencies"]
    documented = {}
    for line in doc.read_text().splitlines():
        m = TABLE_ROW_RE.match(line)
        if m and m.group(1) in ALLOWED:
            deps = {d.strip(" `") for d in m.group(2).split(",")}
            documented[m.group(1)] = {d for d in deps if d and d not in ("—", "-", "none")}
    problems = []
    for layer, deps in ALLOWED.items():
        if layer not in documented:
            problems.append(f"docs/ARCHITECTURE.md: the table has no row for `{layer}`")
        elif documented[layer] != deps:
            problems.append(f"docs/ARCHITECTURE.md: row `{layer}` lists {sorted(documented[layer])}, "
                            f"scripts/check_layers.py allows {sorted(deps)}")
    return problems


def check_tree(root, check_doc=True):
    """Returns (problems, number of includes and CMake references checked)."""
    problems, total = [], 0
    for layer in LAYERS:
        if not (root / layer).is_dir():
            problems.append(f"{layer}/: layer folder missing")
            continue
        for check in (check_includes, check_cmake):
            found, count = check(root, layer)
            problems += found
            total += count
    if check_doc:
        problems += check_architecture_doc(root)
    return problems, total


def report(problems, total):
    if problems:
        print(f"layering: {len(problems)} problem(s); allowed edges are in docs/ARCHITECTURE.md")
        for p in problems:
            print(f"  {p}")
        return 1
    print(f"layering: OK ({total} includes and CMake references checked)")
    return 0


def self_test():
    """Builds small trees with known violations and checks that each is reported, and only those."""

    def make_tree(tmp, files):
        root = Path(tmp)
        for layer in LAYERS:
            (root / layer).mkdir(parents=True, exist_ok=True)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return root

    clean = {
        "tensor/tensor.h": '#include <vector>\n#include "base/error.h"\n#include "tensor/dtype.h"\n',
        "collectives/nccl/process_group_nccl.cc": '#include <nccl.h>\n#include "store/store.h"\n',
        "cli/main.cc": '#include <CLI/CLI.hpp>\n#include "runtime/build_info.h"\n',
        "runtime/CMakeLists.txt": "braid_add_library(runtime SOURCES a.cc\n  DEPS braid::parallel braid::base\n"
                                  "  PRIVATE_DEPS braid_warnings braid_nccl_lib)\n",
        "nn/CMakeLists.txt": "# braid::collectives would be wrong here, but this is a comment\n"
                             "braid_add_library(nn DEPS braid::autograd)\n",
    }
    cases = [
        ("clean tree", {}, []),
        ("include from a sibling", {"collectives/work.cc": '#include "rpc/agent.h"\n'},
         ["collectives/work.cc:1: collectives -> rpc"]),
        ("include upwards in a backend sub-folder", {"collectives/gloo/pg.cc": '\n  #  include "autograd/node.h"\n'},
         ["collectives/gloo/pg.cc:2: collectives -> autograd"]),
        ("cli reaching past runtime", {"cli/run.cc": '#include "tensor/tensor.h"\n'},
         ["cli/run.cc:1: cli -> tensor"]),
        ("base including a layer", {"base/env.h": '#include "tensor/dtype.h"\n'}, ["base/env.h:1: base -> tensor"]),
        ("CMake DEPS on a forbidden layer", {"parallel/CMakeLists.txt": "braid_add_library(parallel\n"
                                             "  DEPS braid::nn braid::rpc)\n"},
         ["parallel/CMakeLists.txt:2: parallel -> rpc"]),
        ("CMake link of a backend sub-target", {"nn/extra/CMakeLists.txt":
                                                "target_link_libraries(braid_nn PRIVATE braid::collectives_nccl)\n"},
         ["nn/extra/CMakeLists.txt:1: nn -> collectives"]),
    ]
    failures = []
    for name, extra, expected in cases:
        with tempfile.TemporaryDirectory() as tmp:
            root = make_tree(tmp, {**clean, **extra})
            problems, _ = check_tree(root, check_doc=False)
        caught = all(any(p.startswith(e) for p in problems) for e in expected)
        if not caught or len(problems) != len(expected):
            failures.append(f"{name}: expected {expected}, got {problems}")
    # The doc check: a table that drops an edge must be reported.
    with tempfile.TemporaryDirectory() as tmp:
        root = make_tree(tmp, {"docs/ARCHITECTURE.md": "| `cli` | `runtime` |\n"})
        doc_problems = check_architecture_doc(root)
    if not any("row `cli`" in p for p in doc_problems) or not any("no row for `base`" in p for p in doc_problems):
        failures.append(f"architecture doc check: got {doc_problems}")

    for f in failures:
        print(f"layering self-test FAILED: {f}")
    if not failures:
        print(f"layering self-test: OK ({len(cases) + 1} cases)")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--self-test", action="store_true", help="check that known violations are caught")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    return report(*check_tree(Path(args.root)))


if __name__ == "__main__":
    sys.exit(main())
