#!/usr/bin/env python3
"""Checks braid's layering: which layer may depend on which (docs/ARCHITECTURE.md, STYLE.md section 3.2).

Four sources are checked against the tables below (ALLOWED, USERS, SUBLAYERS):
  1. every `#include "<layer>/..."` (and `"tests/..."`, `"examples/..."`) in the .h/.cc/.cu/.cuh files of a
     layer folder, of tests/ and of examples/ (sub-folders such as collectives/nccl/ belong to their layer);
  2. every braid::<layer> (or braid_<layer>, braid::<layer>_<backend>) named in those folders' CMake files,
     i.e. the DEPS of braid_add_library and any target_link_libraries, and in a layer's CMake files any
     target that tests/ or examples/ define or any path into them;
  3. inside a layer with a SUBLAYERS entry, every include from one of its sub-folders into another;
  4. the table in docs/ARCHITECTURE.md, which must list the same edges as ALLOWED.

Usage:
  check_layers.py [ROOT]        check the tree at ROOT (default: this repository); exit 1 on a violation
  check_layers.py --self-test   build temporary trees with known violations and check that each is caught
"""
import argparse
import re
import sys
import tempfile
from pathlib import Path

# Layer -> the layers it may depend on (besides itself). Keep in sync with docs/ARCHITECTURE.md; check 4
# fails when they differ.
ALLOWED = {
    "base": set(),
    "security": {"base"},
    "tensor": {"base"},
    "store": {"security", "base"},
    "autograd": {"tensor", "base"},
    "collectives": {"tensor", "store", "security", "base"},
    "rpc": {"tensor", "store", "security", "base"},
    "object_collectives": {"collectives", "rpc", "tensor", "base"},
    "nn": {"autograd", "tensor", "base"},
    "parallel": {"nn", "autograd", "collectives", "tensor", "base"},
    "dist_autograd": {"nn", "autograd", "rpc", "tensor", "base"},
    "runtime": {"parallel", "dist_autograd", "object_collectives", "nn", "autograd", "collectives", "rpc", "store",
                "security", "tensor", "base"},
    "bench": {"runtime", "parallel", "dist_autograd", "object_collectives", "nn", "autograd", "collectives", "rpc",
              "store", "security", "tensor", "base"},
    "cli": {"bench", "runtime", "base"},
}
LAYERS = list(ALLOWED)

# Folders that use the layers without being one. No layer may include or link anything of theirs.
#   tests/     may include and link every layer, and its own support files (tests/...); examples' targets too.
#   examples/  programs that users copy: only what an installed braid offers them. They may include and link
#              every layer except `bench` (benchmarks are no API), and of a layer only its public headers: not
#              `*_impl.h` nor anything under a `detail/` folder (STYLE.md 3.3: a target's private helpers).
#              Nothing of tests/.
#   fuzz/      the libFuzzer targets and their corpus replays (docs/FUZZING.md): like tests/, every layer and
#              its private headers (the decoders under test are often private: rpc/ucx/ucx_envelope.h), and
#              its own files. Nothing of tests/ or examples/, so that a fuzz build needs neither.
USERS = {
    "tests": {"forbidden_layers": set(), "may_include": {"tests", "examples"}, "public_headers_only": False},
    "examples": {"forbidden_layers": {"bench"}, "may_include": {"examples"}, "public_headers_only": True},
    "fuzz": {"forbidden_layers": set(), "may_include": {"fuzz"}, "public_headers_only": False},
}

# Sub-layers inside a layer folder: layer -> its sub-folders in levels, lowest first, e.g.
#   "collectives": [["core"], ["queue"], ["shm", "mpi", "gloo", "nccl"], ["registry"]]
# For includes from one listed sub-folder of the layer into another:
#   - a sub-folder may include the sub-folders on every level below its own, never one above;
#   - sub-folders on the same level never include each other ("engines never include each other");
#   - the sub-folders of the highest level that holds several (the engines) may be included only from the top
#     level (the registry): "only the registry includes every engine"; a level between them may not.
# Files at the top of the layer folder and sub-folders not listed are outside these rules (the layer's
# own rules in ALLOWED still hold for them). Includes from other layers are not checked against sub-layers.
SUBLAYERS = {
    # core: ProcessGroup, Work, options, checks, the Engine interface; queue: EngineProcessGroup and its op
    # queue, health monitor, policy and op bodies; the engines; registry: the one place that knows them all.
    "collectives": [["core"], ["queue"], ["shm", "mpi", "gloo", "nccl", "hier"], ["registry"]],
}

SOURCE_SUFFIXES = {".h", ".cc", ".cu", ".cuh"}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*["<]([A-Za-z0-9_]+)/([^">]+)[">]')
# A relative include that climbs into a USERS folder: "../../tests/support/x.h".
RELATIVE_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"((?:\.\./)+)(tests|examples|fuzz)/([^"]+)"')
# braid::tensor, braid::collectives_nccl, braid_tensor; the word boundary keeps braid_warnings etc. out
# unless their name starts with a layer.
TARGET_RE = re.compile(r"\bbraid(?:::|_)([A-Za-z0-9_]+)")
TABLE_ROW_RE = re.compile(r"^\|\s*`([a-z_]+)`\s*\|([^|]*)\|")
# Targets that tests/ and examples/ define: add_executable(name ...), add_library(${_p}_plugin ...), and the
# helpers that make one from their first argument.
DEFINE_RE = re.compile(r"\b(?:add_executable|add_library|braid_add_test|braid_add_mpi_example)\s*\(\s*([^\s)]+)")
# A path into a USERS folder from a layer's CMake file.
PATH_RE = re.compile(r"(?:\$\{(?:PROJECT|CMAKE)_SOURCE_DIR\}/|\.\./)(tests|examples|fuzz)/")


def layer_of_target(name):
    """Maps a target name (after braid:: or braid_) to its layer: 'collectives_nccl' -> 'collectives'."""
    for layer in sorted(LAYERS, key=len, reverse=True):
        if name == layer or name.startswith(layer + "_"):
            return layer
    return None


def source_files(root, folder):
    for path in sorted((root / folder).rglob("*")):
        if path.suffix in SOURCE_SUFFIXES and path.is_file():
            yield path


def code_lines(path):
    return enumerate(path.read_text(errors="replace").splitlines(), 1)


def sublayer_levels(table):
    """{sub-folder: level} and the level of the engines (the highest that holds several; None if none)."""
    level = {sub: i for i, subs in enumerate(table) for sub in subs}
    several = [i for i, subs in enumerate(table) if len(subs) > 1]
    return level, (several[-1] if several else None)


def sublayer_problem(table, sub, dep):
    """Why sub-folder `sub` may not include sibling `dep` under `table` (a layer's levels), or None."""
    level, engines = sublayer_levels(table)
    if sub not in level or dep not in level or sub == dep:
        return None
    if level[dep] > level[sub]:
        return f"{dep}/ is on a level above {sub}/"
    if level[dep] == level[sub]:
        return f"{sub}/ and {dep}/ share a level: engines never include each other"
    if level[dep] == engines and level[sub] != len(table) - 1:
        return f"{dep}/ is an engine: only the registry ({'/, '.join(table[-1])}/) includes the engines"
    return None


def check_includes(root, folder, sublayers):
    """Problems with the includes of `folder` (a layer, tests or examples), and how many were checked."""
    problems, count = [], 0
    user = USERS.get(folder)
    table = sublayers.get(folder) or []
    for path in source_files(root, folder):
        rel = path.relative_to(root)
        sub = rel.parts[1] if len(rel.parts) > 2 else None  # collectives/mpi/x.cc -> "mpi"
        for lineno, line in code_lines(path):
            m = INCLUDE_RE.match(line)
            if m:
                dep, rest = m.group(1), m.group(2)
            else:
                m = RELATIVE_INCLUDE_RE.match(line)
                if not m:
                    continue
                dep, rest = m.group(2), m.group(3)
            if dep not in ALLOWED and dep not in USERS:
                continue  # not a braid folder (std, fmt/, CLI/, nlohmann/, gloo/, ...)
            count += 1
            where = f"{rel}:{lineno}: {folder} -> {dep} (#include \"{dep}/{rest}\")"
            if dep in USERS:
                if user is None:
                    problems.append(f"{where}: no layer includes from {dep}/")
                elif dep not in user["may_include"]:
                    problems.append(f"{where}: {folder}/ includes nothing of {dep}/")
            elif user is not None:
                if dep in user["forbidden_layers"]:
                    problems.append(f"{where}: {folder}/ may not use {dep}")
                elif user["public_headers_only"] and (rest.endswith("_impl.h") or "detail" in rest.split("/")[:-1]):
                    problems.append(f"{where}: a private header of {dep}")
            elif dep != folder and dep not in ALLOWED[folder]:
                problems.append(where)
            elif dep == folder and sub is not None and table:
                why = sublayer_problem(table, sub, rest.split("/", 1)[0] if "/" in rest else None)
                if why:
                    problems.append(f"{where}: {why}")
    return problems, count


def user_targets(root):
    """The targets that tests/ and examples/ define, by folder: (their literal names, a regex for each name,
    a ${var} part matching any word)."""
    found = {}
    for folder in USERS:
        names, patterns = set(), set()
        for path in sorted((root / folder).rglob("CMakeLists.txt")) if (root / folder).is_dir() else []:
            for _, line in code_lines(path):
                for m in DEFINE_RE.finditer(line.split("#", 1)[0]):
                    parts = re.split(r"\$\{[^}]*\}", m.group(1))
                    if "".join(parts).strip("_") == "":
                        continue  # add_executable(${name} ...): the name is a caller's, found at the call
                    if len(parts) == 1:
                        names.add(m.group(1))
                    patterns.add(r"\w*".join(re.escape(p) for p in parts))
        found[folder] = (names, [re.compile(rf"(?<![\w$]){p}(?!\w)") for p in sorted(patterns)])
    return found


def check_cmake(root, folder, targets):
    problems, count = [], 0
    user = USERS.get(folder)
    for path in sorted((root / folder).rglob("CMakeLists.txt")):
        rel = path.relative_to(root)
        for lineno, line in code_lines(path):
            code = line.split("#", 1)[0]  # CMake comments; braid's CMake files put no '#' inside strings
            for m in TARGET_RE.finditer(code):
                dep = layer_of_target(m.group(1))
                if dep is None:
                    continue  # braid_warnings, braid_sanitizers, braid_nccl_lib, ...
                count += 1
                where = f"{rel}:{lineno}: {folder} -> {dep} (CMake names {m.group(0)})"
                if user is not None:
                    if dep in user["forbidden_layers"]:
                        problems.append(f"{where}: {folder}/ may not use {dep}")
                elif dep != folder and dep not in ALLOWED[folder]:
                    problems.append(where)
            own = targets[folder][0] if folder in targets else set()
            for owner, (_, patterns) in targets.items():
                if owner == folder or (user is not None and owner in user["may_include"]):
                    continue
                # Whole words only; a name this folder defines itself is its own (examples' my_net_plugin
                # against tests' ${_p}_plugin).
                named = {m.group(0) for pattern in patterns for m in pattern.finditer(code)} - own
                for name in sorted(named):
                    count += 1
                    problems.append(f"{rel}:{lineno}: {folder} -> {owner} (CMake names {name}, a target of {owner}/)")
            if user is None:
                for m in PATH_RE.finditer(code):
                    problems.append(f"{rel}:{lineno}: {folder} -> {m.group(1)} (CMake names a path into "
                                    f"{m.group(1)}/)")
    return problems, count


def check_sublayer_tables(sublayers):
    problems = []
    for layer, table in sublayers.items():
        if layer not in ALLOWED:
            problems.append(f"SUBLAYERS: `{layer}` is not a layer")
        names = [sub for subs in table for sub in subs]
        for sub in sorted({s for s in names if names.count(s) > 1}):
            problems.append(f"SUBLAYERS[{layer}]: {sub}/ is on more than one level")
    return problems


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


def check_tree(root, check_doc=True, sublayers=None):
    """Returns (problems, number of includes and CMake references checked)."""
    sublayers = SUBLAYERS if sublayers is None else sublayers
    problems, total = check_sublayer_tables(sublayers), 0
    targets = user_targets(root)
    for folder in LAYERS + list(USERS):
        if not (root / folder).is_dir():
            if folder in ALLOWED:
                problems.append(f"{folder}/: layer folder missing")
            continue
        found, count = check_includes(root, folder, sublayers)
        problems += found
        total += count
        found, count = check_cmake(root, folder, targets)
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


# The layout collectives/ is moving to, for the self-test of the sub-layer rules.
SELF_TEST_SUBLAYERS = {"collectives": [["core"], ["queue"], ["shm", "mpi", "gloo", "nccl"], ["registry"]]}


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
        "collectives/nccl/nccl_engine.cc": '#include <nccl.h>\n#include "store/store.h"\n',
        "cli/main.cc": '#include <CLI/CLI.hpp>\n#include "runtime/build_info.h"\n#include "bench/rpc/rpc_bench.h"\n',
        "runtime/CMakeLists.txt": "braid_add_library(runtime SOURCES a.cc\n  DEPS braid::parallel braid::base\n"
                                  "  PRIVATE_DEPS braid_warnings braid_nccl_lib)\n",
        "nn/CMakeLists.txt": "# braid::collectives would be wrong here, but this is a comment\n"
                             "braid_add_library(nn DEPS braid::autograd)\n",
        "bench/rpc/rpc_bench.cc": '#include "bench/bench_job.h"\n#include "runtime/launch_env.h"\n#include "rpc/api.h"\n',
        "bench/CMakeLists.txt": "braid_add_library(bench SOURCES rpc/rpc_bench.cc DEPS braid::runtime braid::rpc)\n"
                                "add_executable(fsdp_bench fsdp/fsdp_bench_main.cc)\n"
                                "target_link_libraries(fsdp_bench PRIVATE braid::bench benchmark::benchmark)\n",
        # tests/ may use every layer (bench too), its own support files and examples' targets.
        "tests/unit/bench/rpc_bench_test.cc": '#include "bench/rpc/rpc_bench.h"\n#include "rpc/tcp/tcp_transport_impl.h"\n'
                                             '#include "tests/unit/rpc/support/agent_job.h"\n',
        "tests/CMakeLists.txt": "add_library(braid_test_main OBJECT support/catch_main.cc)\n"
                                "add_executable(${layer}_tests ${_srcs})\n"
                                "add_library(${_p}_plugin MODULE plugins/${_p}_plugin.cc)\n"
                                "target_link_libraries(bench_tests PRIVATE braid::bench braid::runtime)\n"
                                "add_dependencies(runtime_tests my_net_plugin)\n",
        # examples/ may use the public headers of every layer but bench.
        "examples/collectives_demo.cc": '#include "collectives/registry/group_registry.h"\n#include "runtime/plugin/plugin.h"\n',
        "examples/CMakeLists.txt": "add_executable(${name} ${name}.cc)\n"
                                   "braid_add_mpi_example(collectives_demo DEPS braid::collectives_registry)\n"
                                   "add_library(my_net_plugin MODULE custom_model/my_net.cc)\n"
                                   "target_link_libraries(my_net_plugin PRIVATE braid::braid)\n",
        # fuzz/ may use every layer and its private headers, and its own files.
        "fuzz/fuzz_ucx_envelope.cc": '#include "rpc/ucx/ucx_envelope.h"\n#include "fuzz/fuzz_support.h"\n',
        "fuzz/CMakeLists.txt": "add_executable(fuzz_ucx_envelope_replay fuzz_ucx_envelope.cc)\n"
                               "target_link_libraries(fuzz_ucx_envelope_replay PRIVATE braid::rpc braid::runtime)\n",
    }
    # The sub-layer layout, clean: each sub-folder includes the levels below it; the registry every engine.
    layered = {
        "collectives/core/process_group.h": '#include "tensor/tensor.h"\n#include "store/store.h"\n',
        "collectives/queue/engine_process_group.h": '#include "collectives/core/process_group.h"\n',
        "collectives/shm/shm_engine.cc": '#include "collectives/queue/engine_process_group.h"\n',
        "collectives/mpi/mpi_engine.cc": '#include "collectives/queue/engine_process_group.h"\n'
                                                '#include "collectives/core/process_group.h"\n'
                                                '#include "collectives/mpi/mpi_types.h"\n',
        "collectives/gloo/gloo_engine.cc": '#include "collectives/queue/engine_process_group.h"\n',
        "collectives/registry/engine_factory.cc": "".join(f'#include "collectives/{e}/{e}_engine.h"\n'
                                                    for e in ("shm", "mpi", "gloo", "nccl")),
        "collectives/process_group.h": '#include "collectives/mpi/process_group_mpi.h"\n',  # top level: free
    }
    cases = [
        ("clean tree", {}, [], None),
        ("include from a sibling", {"collectives/work.cc": '#include "rpc/agent.h"\n'},
         ["collectives/work.cc:1: collectives -> rpc"], None),
        ("include upwards in a backend sub-folder", {"collectives/gloo/pg.cc": '\n  #  include "autograd/node.h"\n'},
         ["collectives/gloo/pg.cc:2: collectives -> autograd"], None),
        ("cli reaching past runtime", {"cli/run.cc": '#include "tensor/tensor.h"\n'},
         ["cli/run.cc:1: cli -> tensor"], None),
        ("base including a layer", {"base/env.h": '#include "tensor/dtype.h"\n'}, ["base/env.h:1: base -> tensor"],
         None),
        ("CMake DEPS on a forbidden layer", {"parallel/CMakeLists.txt": "braid_add_library(parallel\n"
                                             "  DEPS braid::nn braid::rpc)\n"},
         ["parallel/CMakeLists.txt:2: parallel -> rpc"], None),
        ("CMake link of a backend sub-target", {"nn/extra/CMakeLists.txt":
                                                "target_link_libraries(braid_nn PRIVATE braid::collectives_nccl)\n"},
         ["nn/extra/CMakeLists.txt:1: nn -> collectives"], None),
        # bench sits between runtime and cli.
        ("runtime including bench", {"runtime/run/driver.cc": '#include "bench/bench_stats.h"\n'},
         ["runtime/run/driver.cc:1: runtime -> bench"], None),
        ("runtime linking bench", {"runtime/CMakeLists.txt": "braid_add_library(runtime DEPS braid::bench)\n"},
         ["runtime/CMakeLists.txt:1: runtime -> bench"], None),
        ("bench reaching into cli", {"bench/ddp/ddp_bench.cc": '#include "cli/entry.h"\n'},
         ["bench/ddp/ddp_bench.cc:1: bench -> cli"], None),
        # tests/ and examples/.
        ("a layer including from tests", {"parallel/ddp/reducer.cc": '#include "tests/support/fake_group.h"\n'},
         ["parallel/ddp/reducer.cc:1: parallel -> tests"], None),
        ("a layer including from examples by a relative path",
         {"runtime/models/net.cc": '#include "../../examples/custom_model/net.h"\n'},
         ["runtime/models/net.cc:1: runtime -> examples"], None),
        ("a layer linking a test target", {"rpc/CMakeLists.txt": "target_link_libraries(braid_rpc PRIVATE "
                                           "braid_test_main rpc_tests kit_plugin)\n"},
         ["rpc/CMakeLists.txt:1: rpc -> tests (CMake names braid_test_main",
          "rpc/CMakeLists.txt:1: rpc -> tests (CMake names rpc_tests",
          "rpc/CMakeLists.txt:1: rpc -> tests (CMake names kit_plugin"], None),
        ("a layer compiling a file of examples",
         {"runtime/CMakeLists.txt": "target_sources(braid_runtime PRIVATE ${PROJECT_SOURCE_DIR}/examples/a.cc "
                                    "collectives_demo)\n"},
         ["runtime/CMakeLists.txt:1: runtime -> examples (CMake names a path",
          "runtime/CMakeLists.txt:1: runtime -> examples (CMake names collectives_demo"], None),
        ("an example including bench", {"examples/rpc_demo.cc": '#include "bench/rpc/rpc_bench.h"\n'},
         ["examples/rpc_demo.cc:1: examples -> bench"], None),
        ("an example linking bench", {"examples/CMakeLists.txt": "target_link_libraries(demo PRIVATE braid::bench)\n"},
         ["examples/CMakeLists.txt:1: examples -> bench"], None),
        ("an example including a test support header",
         {"examples/rpc_demo.cc": '#include "tests/unit/rpc/support/agent_job.h"\n'},
         ["examples/rpc_demo.cc:1: examples -> tests"], None),
        ("an example linking a test target",
         {"examples/CMakeLists.txt": "target_link_libraries(demo PRIVATE braid::rpc runtime_tests)\n"},
         ["examples/CMakeLists.txt:1: examples -> tests (CMake names runtime_tests"], None),
        ("an example including private headers",
         {"examples/rpc_demo.cc": '#include "rpc/tcp/tcp_transport_impl.h"\n#include "base/detail/spin.h"\n'},
         ["examples/rpc_demo.cc:1: examples -> rpc", "examples/rpc_demo.cc:2: examples -> base"], None),
        # fuzz/.
        ("a layer including from fuzz", {"rpc/wire.cc": '#include "fuzz/fuzz_support.h"\n'},
         ["rpc/wire.cc:1: rpc -> fuzz"], None),
        ("a layer linking a fuzz target",
         {"store/CMakeLists.txt": "target_link_libraries(braid_store PRIVATE fuzz_ucx_envelope_replay)\n"},
         ["store/CMakeLists.txt:1: store -> fuzz (CMake names fuzz_ucx_envelope_replay"], None),
        ("a fuzz target including a test support header",
         {"fuzz/fuzz_rpc_wire.cc": '#include "tests/unit/rpc/support/agent_job.h"\n'},
         ["fuzz/fuzz_rpc_wire.cc:1: fuzz -> tests"], None),
        ("a test including a fuzz target's file",
         {"tests/unit/rpc/wire_test.cc": '#include "../../../fuzz/fuzz_support.h"\n'},
         ["tests/unit/rpc/wire_test.cc:1: tests -> fuzz"], None),
        # Sub-layers, under the table of the layout collectives/ is moving to.
        ("sub-layers: clean layout", layered, [], SELF_TEST_SUBLAYERS),
        ("sub-layers: an engine including another engine",
         {**layered, "collectives/mpi/x.cc": '#include "collectives/gloo/y.h"\n'},
         ["collectives/mpi/x.cc:1: collectives -> collectives"], SELF_TEST_SUBLAYERS),
        ("sub-layers: the queue including an engine",
         {**layered, "collectives/queue/lanes.cc": '#include "collectives/nccl/work_nccl.h"\n'},
         ["collectives/queue/lanes.cc:1: collectives -> collectives"], SELF_TEST_SUBLAYERS),
        ("sub-layers: core including the registry",
         {**layered, "collectives/core/work.h": '#include "collectives/registry/engine_factory.h"\n'},
         ["collectives/core/work.h:1: collectives -> collectives"], SELF_TEST_SUBLAYERS),
        ("sub-layers: a level between the engines and the registry including an engine",
         {**layered, "collectives/select/policy.cc": '#include "collectives/shm/shm_engine.h"\n'
                                                     '#include "collectives/queue/engine_process_group.h"\n'},
         ["collectives/select/policy.cc:1: collectives -> collectives"],
         {"collectives": SELF_TEST_SUBLAYERS["collectives"][:3] + [["select"], ["registry"]]}),
        ("sub-layers: a sub-folder on two levels", {}, ["SUBLAYERS[collectives]: mpi/ is on more than one level"],
         {"collectives": [["core", "mpi"], ["queue"], ["mpi", "gloo"]]}),
    ]
    failures = []
    for name, extra, expected, sublayers in cases:
        with tempfile.TemporaryDirectory() as tmp:
            root = make_tree(tmp, {**clean, **extra})
            problems, _ = check_tree(root, check_doc=False, sublayers=sublayers or {})
        caught = all(any(p.startswith(e) for p in problems) for e in expected)
        if not caught or len(problems) != len(expected):
            failures.append(f"{name}: expected {expected}, got {problems}")
    # The sub-layer rules name the rule they enforce.
    if "engines never include each other" not in (sublayer_problem(SELF_TEST_SUBLAYERS["collectives"], "mpi", "gloo")
                                                  or ""):
        failures.append("sub-layers: an engine including an engine is not reported as such")
    # The doc check: a table that drops an edge must be reported.
    with tempfile.TemporaryDirectory() as tmp:
        root = make_tree(tmp, {"docs/ARCHITECTURE.md": "| `cli` | `runtime` |\n"})
        doc_problems = check_architecture_doc(root)
    if not any("row `cli`" in p for p in doc_problems) or not any("no row for `base`" in p for p in doc_problems):
        failures.append(f"architecture doc check: got {doc_problems}")

    for f in failures:
        print(f"layering self-test FAILED: {f}")
    if not failures:
        print(f"layering self-test: OK ({len(cases) + 2} cases)")
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
