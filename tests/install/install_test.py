#!/usr/bin/env python3
"""install_out_of_tree: braid as an installed library, the way a user brings their own model.

Usage: install_test.py BUILD_DIR SOURCE_DIR MPIEXEC

  1. `cmake --install BUILD_DIR --prefix T/prefix`, then the tree is moved to T/moved (it must be relocatable);
  2. examples/custom_model is configured and built from outside the source tree (T/build) with
     find_package(braid) against T/moved: libmy_net.so;
  3. a program built with `pkg-config --cflags --libs braid` alone prints the version it linked;
  4. the installed `braid check` and `braid run` (2 trainers, DDP, gloo, under mpirun) run the example's job
     with that plugin: the check names the plugin and its model, and the loss falls;
  5. the installed braid refuses a plugin named wrong (missing file, not a plugin, unknown kind) with the reason.
Every subprocess has a timeout; the first failure prints its output and exits 1."""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_checks import expect, run  # noqa: E402


PROGRAM = r'''
#include <cstdio>
#include "base/config.h"
#include "runtime/build_info.h"
int main() {
  std::printf("linked braid %s; built %s\n", BRAID_VERSION, braid::runtime::version_line().c_str());
  return 0;
}
'''


def main():
    build_dir, source_dir, mpiexec = sys.argv[1:4]
    example = os.path.join(source_dir, "examples", "custom_model")
    with tempfile.TemporaryDirectory(prefix="braid-install-") as tmp:
        prefix = os.path.join(tmp, "prefix")
        r = run(["cmake", "--install", build_dir, "--prefix", prefix])
        expect("cmake --install into a temporary prefix", r.returncode == 0, r)
        moved = os.path.join(tmp, "moved")
        shutil.move(prefix, moved)
        braid = os.path.join(moved, "bin", "braid")
        for rel in ("bin/braid", "include/braid/runtime/plugin/plugin.h", "include/braid/base/config.h",
                    "lib/cmake/braid/braidConfig.cmake", "lib/cmake/braid/braidTargets.cmake",
                    "lib/pkgconfig/braid.pc"):
            expect(f"installed {rel}", os.path.exists(os.path.join(moved, rel)))
        libs = sorted(f for f in os.listdir(os.path.join(moved, "lib")) if f.startswith("libbraid_runtime.so"))
        expect(f"libbraid_runtime is shared and versioned ({', '.join(libs)})",
               any(re.fullmatch(r"libbraid_runtime\.so\.\d+\.\d+\.\d+", f) for f in libs) and
               "libbraid_runtime.so" in libs, None)
        r = run(["readelf", "-d", os.path.join(moved, "lib", "libbraid_runtime.so")])
        soname = re.search(r"SONAME.*\[(.*)\]", r.stdout)
        expect(f"SONAME {soname.group(1) if soname else '?'}",
               soname is not None and re.fullmatch(r"libbraid_runtime\.so\.\d+\.\d+", soname.group(1)), r)
        r = run([braid, "--version"])
        expect(f"the moved braid runs: {r.stdout.strip()}", r.returncode == 0 and "braid" in r.stdout, r)
        r = run(["ldd", braid])
        found = dict(re.findall(r"(libbraid_\w+)\.so\S* => (\S+)", r.stdout))
        expect(f"the moved braid loads its {len(found)} braid libraries from the moved tree",
               "libbraid_cli" in found and "libbraid_runtime" in found and
               all(os.path.realpath(p).startswith(os.path.join(moved, "lib") + os.sep) for p in found.values()), r)

        # The example, configured and built outside the source tree against the moved installation only.
        build = os.path.join(tmp, "build")
        r = run(["cmake", "-S", example, "-B", build, f"-DCMAKE_PREFIX_PATH={moved}", "-DCMAKE_BUILD_TYPE=Release"])
        expect("examples/custom_model configures with find_package(braid)", r.returncode == 0, r)
        r = run(["cmake", "--build", build, "-j2"])
        plugin = os.path.join(build, "libmy_net.so")
        expect("examples/custom_model builds libmy_net.so", r.returncode == 0 and os.path.exists(plugin), r)

        pc_env = {"PKG_CONFIG_PATH": os.path.join(moved, "lib", "pkgconfig")}
        r = run(["pkg-config", "--cflags", "--libs", "braid"], extra_env=pc_env)
        flags = r.stdout.split()
        includes = [os.path.normpath(f[2:]) for f in flags if f.startswith("-I")]
        expect(f"pkg-config braid points into the moved tree ({' '.join(includes)})",
               r.returncode == 0 and os.path.join(moved, "include", "braid") in includes, r)
        src = os.path.join(tmp, "version.cc")
        with open(src, "w") as f:
            f.write(PROGRAM)
        exe = os.path.join(tmp, "version")
        r = run(["g++", src, "-o", exe] + flags)
        expect("a program builds with pkg-config's flags alone", r.returncode == 0, r)
        r = run([exe])
        expect(f"and runs: {r.stdout.strip()}", r.returncode == 0 and "linked braid" in r.stdout, r)

        job = os.path.join(example, "job.yaml")
        with_plugin = ["--set", f"model.plugin={plugin}"]
        r = run([braid, "check", job] + with_plugin)
        expect("installed braid check loads the plugin",
               r.returncode == 0 and "model my_net" in r.stdout and "plugin my_net 1.0" in r.stdout, r)
        r = run([mpiexec, "-np", "2", "--oversubscribe", braid, "run", job] + with_plugin, timeout=180)
        # The test split's loss after each of the 4 epochs (a step's own loss is one batch's, and noisy).
        losses = [float(x) for x in re.findall(r"eval after step \d+ .*?: loss (\d+\.\d+)", r.stdout)]
        expect(f"installed braid trains my_net on 2 trainers with DDP under mpirun, test loss falls {losses}",
               r.returncode == 0 and len(losses) == 4 and losses[-1] < losses[0] and "done: 64 steps" in r.stdout, r)

        # The plugin's failures as a user meets them with the installed braid.
        r = run([braid, "check", job, "--set", "model.plugin=" + os.path.join(tmp, "libmissing.so")])
        expect("a missing plugin file", r.returncode == 2 and "libmissing.so (model.plugin in" in r.stderr
               and "no such file" in r.stderr, r)
        r = run([braid, "check", job, "--set", "model.plugin=" + os.path.join(moved, "lib", "libbraid_base.so")])
        expect("a library that is not a plugin", r.returncode == 2 and "not a braid plugin" in r.stderr, r)
        r = run([braid, "check", job, "--set", "model.kind=my_nte"] + with_plugin)
        expect("an unknown kind lists every model, the plugin's included",
               r.returncode == 2 and "unknown model 'my_nte' (did you mean 'my_net'?)" in r.stderr and
               "my_net (plugin libmy_net.so)" in r.stderr and "mlp" in r.stderr, r)
    print("install_out_of_tree: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
