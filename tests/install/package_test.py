#!/usr/bin/env python3
"""package_deb: `make package`'s Debian package, built and installed the way a user installs it.

Usage: package_test.py BUILD_DIR

  1. cpack in BUILD_DIR (what `make package` runs): braid_<version>_amd64.deb;
  2. its control fields: Depends lists the Debian package of every library a file of the package loads
     (checked against the files themselves: each DT_NEEDED library is resolved, its owning package looked up
     with dpkg -S, and that package must be in Depends), Recommends the development packages;
  3. `apt-get install ./braid_<version>_amd64.deb` (as root, when braid is not installed already), then
     `braid info` and `braid --version` from PATH, find_package(braid) from /usr, and `apt-get remove braid`;
     without root the package is unpacked with dpkg-deb -x and braid info runs from there.
Every subprocess has a timeout; the first failure prints its output and exits 1."""
import glob
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_checks import expect  # noqa: E402


def run(cmd, timeout=300, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def package_names(field):
    """'libc6 (>= 2.34), libfmt9 (>= 9.1.0+ds1), openmpi-bin' -> {'libc6', 'libfmt9', 'openmpi-bin'}."""
    names = set()
    for part in field.split(","):
        for alt in part.split("|"):
            alt = alt.strip()
            if alt:
                names.add(re.split(r"[\s(:]", alt)[0])
    return names


def elf_files(root):
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            if os.path.islink(p):
                continue
            with open(p, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    yield p


def satisfied_by(depends):
    """The packages that satisfy a Depends list: those it names, the alternatives of a metapackage it names
    (libopenblas0 -> libopenblas0-pthread | ...), and packages that Provide a name in it
    (libspdlog1.10 provides libspdlog1.10-fmt9)."""
    ok = set(depends)
    for name in depends:
        r = run(["dpkg-query", "-W", "-f=${Depends}", name])
        if r.returncode == 0:
            ok |= package_names(r.stdout)
    return ok


def owner_of(path, cache={}):
    if path not in cache:
        r = run(["dpkg", "-S", path])
        cache[path] = r.stdout.split(":")[0].strip() if r.returncode == 0 else None
    return cache[path]


def provides(pkg, cache={}):
    if pkg not in cache:
        cache[pkg] = package_names(run(["dpkg-query", "-W", "-f=${Provides}", pkg]).stdout)
    return cache[pkg]


def check_depends(deb, depends):
    """Every library that a file of the package links directly (DT_NEEDED) comes from the package itself or
    from a package that Depends names; libraries that no Debian package owns (the CUDA toolkit's) are listed,
    not required. What those libraries need in turn is their own packages' business."""
    ok = satisfied_by(depends)
    with tempfile.TemporaryDirectory(prefix="braid-deb-") as root:
        r = run(["dpkg-deb", "-x", deb, root])
        expect("dpkg-deb -x", r.returncode == 0, r)
        libdir = os.path.join(root, "usr", "lib")
        own = set(os.listdir(libdir))
        unowned, missing, checked = set(), [], 0
        for f in elf_files(root):
            needed = re.findall(r"\(NEEDED\).*\[(.*)\]", run(["readelf", "-d", f]).stdout)
            resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", run(["ldd", f], env={**os.environ, "LD_LIBRARY_PATH": libdir})
                                       .stdout, re.M))
            for lib in needed:
                if lib in own or lib.startswith("ld-linux"):  # the dynamic loader itself (libc6)
                    continue
                checked += 1
                path = resolved.get(lib)
                if path is None or path == "not":
                    missing.append(f"{os.path.relpath(f, root)} needs {lib}, which does not resolve")
                    continue
                pkg = owner_of(os.path.realpath(path)) or owner_of(path)
                if pkg is None:
                    unowned.add(os.path.realpath(path))
                elif pkg not in ok and not (provides(pkg) & ok):
                    missing.append(f"{os.path.relpath(f, root)} needs {lib} from {pkg}, which Depends does not name")
        expect(f"each of the {checked} libraries the packaged files link comes from a package in Depends"
               + (f" (owned by no package: {', '.join(sorted(unowned))})" if unowned else ""), not missing,
               None if not missing else subprocess.CompletedProcess(["check"], 1, "\n".join(missing), ""))
        r = run([os.path.join(root, "usr", "bin", "braid"), "info"], env={**os.environ})
        expect("the unpacked braid runs `braid info` from wherever it lies", r.returncode == 0 and "braid" in r.stdout, r)


def main():
    build_dir = sys.argv[1]
    for old in glob.glob(os.path.join(build_dir, "braid_*_amd64.deb")):
        os.remove(old)
    r = run(["cpack", "-G", "DEB"], cwd=build_dir, timeout=600)
    debs = glob.glob(os.path.join(build_dir, "braid_*_amd64.deb"))
    expect(f"cpack builds {', '.join(os.path.basename(d) for d in debs)}", r.returncode == 0 and len(debs) == 1, r)
    deb = debs[0]
    fields = {}
    for key in ("Package", "Version", "Depends", "Recommends"):
        fields[key] = run(["dpkg-deb", "-f", deb, key]).stdout.strip()
    print(f"     Depends: {fields['Depends']}\n     Recommends: {fields['Recommends']}")
    depends = package_names(fields["Depends"])
    expect("Depends names the runtime libraries and Open MPI's launcher",
           {"openmpi-bin", "libc6", "libstdc++6"} <= depends and any(d.startswith("libopenmpi") for d in depends)
           and any(d.startswith("libspdlog") for d in depends))
    expect("Recommends names the development packages", {"libspdlog-dev", "libfmt-dev"} <= package_names(fields["Recommends"]))
    contents = run(["dpkg-deb", "-c", deb]).stdout
    for path in ("./usr/bin/braid", "./usr/include/braid/runtime/plugin/plugin.h", "./usr/lib/cmake/braid/braidConfig.cmake",
                 "./usr/lib/pkgconfig/braid.pc"):
        expect(f"the package holds {path}", path in contents)
    check_depends(deb, depends)

    installed_before = run(["dpkg-query", "-W", "-f=${Status}", "braid"]).stdout
    if os.geteuid() != 0 or "install ok installed" in installed_before:
        print("skip apt-get install: " + ("not root" if os.geteuid() != 0 else "a braid package is installed already"))
        return 0
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    r = run(["apt-get", "install", "-y", "-q", "--no-install-recommends", os.path.abspath(deb)], env=env, timeout=600)
    try:
        expect("apt-get install ./" + os.path.basename(deb), r.returncode == 0, r)
        r = run(["braid", "info"], env={k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"})
        expect("braid info from PATH (" + run(["which", "braid"]).stdout.strip() + ")",
               r.returncode == 0 and "braid 0." in r.stdout, r)
        r = run(["braid", "--version"])
        expect(f"braid --version: {r.stdout.strip()}", r.returncode == 0, r)
        with tempfile.TemporaryDirectory(prefix="braid-deb-find-") as tmp:
            with open(os.path.join(tmp, "CMakeLists.txt"), "w") as f:
                f.write("cmake_minimum_required(VERSION 3.20)\nproject(probe LANGUAGES CXX)\n"
                        "find_package(braid CONFIG REQUIRED)\nmessage(STATUS \"braid ${braid_VERSION} at ${BRAID_EXECUTABLE}\")\n")
            r = run(["cmake", "-S", tmp, "-B", os.path.join(tmp, "b")])
            expect("find_package(braid) finds the installed package", r.returncode == 0 and "at /usr/bin/braid" in r.stdout, r)
    finally:
        rm = run(["apt-get", "remove", "-y", "-q", "braid"], env=env)
        print(("ok   " if rm.returncode == 0 else "FAIL ") + "apt-get remove braid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
