#!/usr/bin/env bash
# Packs braid's GPU test binary (and the braid executable, when built) with every shared library it
# needs, so that it runs on a GPU machine with another Linux distribution and no CUDA toolkit or NCCL:
#
#   scripts/gpu_bundle.sh <build-dir> <out-dir>
#   <out-dir>/run.sh gpu_tests [catch2 args...]      # on the GPU machine
#   <out-dir>/run.sh braid info
#
# BRAID_BUNDLE_EXTRA adds more programs of the build directory (paths relative to it).
#
# What goes in:
#   bin/   the programs, debug info stripped (symbols kept for backtraces; over 1 MiB: gzip-compressed);
#   lib/   every library `ldd` lists for them, braid's own (libbraid_*.so) with their debug info stripped
#          (libc and the dynamic loader ld-linux-x86-64.so.2 included:
#          the programs need this system's glibc), except the NVIDIA driver's own libraries (libcuda,
#          libnvidia-*), which must come from the GPU machine because they match its kernel module, and
#          cuBLAS (too large), which run.sh finds there (MACHINE_LIBS);
#   run.sh starts a program through the carried loader with --library-path <bundle>/lib:<driver dir>,
#          where the driver dir is the GPU machine's directory of libcuda.so.1 (ldconfig -p, then the
#          usual places).
#
# Size: libnccl.so.2 is ~210 MB, almost all of it GPU code for eight architectures (sm_75 ... sm_120).
# The bundle keeps only the architectures in BRAID_BUNDLE_SM (default 90: H100/H200): the payloads of
# the other fatbin entries are zeroed in place (the ELF layout and the fatbin headers stay as they were,
# so the CUDA runtime still parses every entry but only ever loads the sm_90 one), and the library is
# stored gzip-compressed; run.sh unpacks compressed files on first use. The whole bundle must stay under
# BRAID_BUNDLE_MAX_MIB (default 60).
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <build-dir> <out-dir>" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
out=$2
keep_sm=${BRAID_BUNDLE_SM:-90}
max_mib=${BRAID_BUNDLE_MAX_MIB:-60}
marker=.braid-gpu-bundle

programs=()
[[ -x $build/tests/gpu_tests ]] || { echo "$0: $build/tests/gpu_tests not found (build the gpu_tests target)" >&2; exit 1; }
programs+=("$build/tests/gpu_tests")
[[ -x $build/cli/braid ]] && programs+=("$build/cli/braid")
# More programs of the build directory, e.g. BRAID_BUNDLE_EXTRA="tests/mp/collectives_mp_tests".
for extra in ${BRAID_BUNDLE_EXTRA:-}; do
  [[ -x $build/$extra ]] || { echo "$0: $build/$extra (BRAID_BUNDLE_EXTRA) not found" >&2; exit 1; }
  programs+=("$build/$extra")
done

if [[ -e $out ]]; then
  if [[ -f $out/$marker ]]; then
    rm -rf "$out"
  elif [[ -n $(ls -A "$out") ]]; then
    echo "$0: $out exists and is not a bundle made by this script; refusing to overwrite it" >&2
    exit 1
  fi
fi
mkdir -p "$out/bin" "$out/lib"
touch "$out/$marker"

# The NVIDIA driver's user-space libraries: never carried (see above).
is_driver_lib() {
  case $1 in
    libcuda.so*|libnvidia-*|libcudadebugger.so*|libnvcuvid.so*|libnvoptix.so*) return 0 ;;
    *) return 1 ;;
  esac
}

# cuBLAS (libcublasLt alone is ~500 MB): not carried either. A GPU machine with CUDA has it in its toolkit
# or in the nvidia-cublas wheel beside PyTorch; run.sh looks there for the sonames listed in MACHINE_LIBS.
is_machine_lib() {
  case $1 in
    libcublas.so*|libcublasLt.so*) return 0 ;;
    *) return 1 ;;
  esac
}

declare -A libs=()  # soname -> resolved path
loader=""
missing=()
for prog in "${programs[@]}"; do
  cp "$prog" "$out/bin/"
  strip --strip-debug "$out/bin/$(basename "$prog")"
  while read -r line; do
    if [[ $line =~ ^([^[:space:]]+)\ =\>\ not\ found ]]; then
      is_driver_lib "${BASH_REMATCH[1]}" || is_machine_lib "${BASH_REMATCH[1]}" ||
        missing+=("${BASH_REMATCH[1]} (needed by $(basename "$prog"))")
    elif [[ $line =~ ^([^[:space:]]+)\ =\>\ ([^[:space:]]+)\ \( ]]; then
      libs[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
    elif [[ $line =~ ^(/[^[:space:]]*ld-linux[^[:space:]]*)\ \( ]]; then
      loader=${BASH_REMATCH[1]}
    fi
  done < <(ldd "$prog")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  printf '%s: libraries not found on this machine: %s\n' "$0" "${missing[*]}" >&2
  exit 1
fi
[[ -n $loader ]] || { echo "$0: ldd named no dynamic loader" >&2; exit 1; }
cp -L "$loader" "$out/lib/ld-linux-x86-64.so.2"

for soname in "${!libs[@]}"; do
  is_driver_lib "$soname" && continue
  if is_machine_lib "$soname"; then
    echo "$soname" >> "$out/MACHINE_LIBS"
    continue
  fi
  cp -L "${libs[$soname]}" "$out/lib/$soname"
  chmod u+w "$out/lib/$soname"
done
touch "$out/MACHINE_LIBS"

# Large libraries: drop debug info, prune GPU code to the kept architectures, compress.
prune_fatbins() {
  python3 - "$1" "$keep_sm" <<'PY'
import struct, sys
path, keep = sys.argv[1], {int(s) for s in sys.argv[2].split(",") if s}
data = bytearray(open(path, "rb").read())
if data[:4] != b"\x7fELF" or data[4] != 2:
    sys.exit(0)
shoff, = struct.unpack_from("<Q", data, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
strtab = sections[shstrndx][4]
def name(off):
    end = data.index(b"\0", strtab + off)
    return data[strtab + off:end].decode()
MAGIC = 0xBA55ED50
kept = zeroed = 0
for sec in sections:
    if name(sec[0]) not in (".nv_fatbin", "__nv_relfatbin") or sec[1] == 8:  # 8: SHT_NOBITS
        continue
    pos, end = sec[4], sec[4] + sec[5]
    while pos + 16 <= end:
        magic, _, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != MAGIC:
            pos += 8
            continue
        entry, entries_end = pos + header_size, pos + header_size + fat_size
        while entry < entries_end:
            # Entry header: kind, version, header size, padded payload size, ..., arch at byte 28.
            kind, _, eh_size, padded = struct.unpack_from("<HHII", data, entry)
            arch, = struct.unpack_from("<I", data, entry + 28)
            payload = entry + eh_size
            if arch in keep:
                kept += padded
            else:
                data[payload:payload + padded] = bytes(padded)
                zeroed += padded
            entry = payload + padded
        pos = entries_end
if zeroed:
    open(path, "wb").write(data)
print(f"  {path.rsplit('/', 1)[-1]}: kept {kept / 2**20:.1f} MiB of GPU code for sm {sorted(keep)}, "
      f"zeroed {zeroed / 2**20:.1f} MiB")
PY
}
# braid's own libraries carry their debug info (RelWithDebInfo): none of it is needed to run the tests.
for f in "$out"/lib/libbraid_*; do
  strip --strip-debug "$f"
done
# Over 8 MiB: debug info stripped and foreign GPU code zeroed; over 1 MiB (the dynamic loader never is):
# compressed, which keeps the bundle under the device tool's 64 MiB now that braid is shared libraries.
for f in "$out"/lib/* "$out"/bin/*; do
  [[ $(stat -c %s "$f") -gt $((1 << 20)) ]] || continue
  if [[ $f == "$out"/lib/* && $(stat -c %s "$f") -gt $((8 << 20)) ]]; then
    strip --strip-debug "$f"
    prune_fatbins "$f"
  fi
  gzip -9 "$f"
done

cat > "$out/run.sh" <<'RUN'
#!/bin/sh
# Runs a program of this bundle (made by braid's scripts/gpu_bundle.sh) with the bundle's dynamic loader
# and libraries, and this machine's own NVIDIA driver libraries.
#   ./run.sh gpu_tests [catch2 args]   |   ./run.sh braid info   |   ./run.sh /path/to/program [args]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 <program> [args...]   (programs: $(ls "$here/bin" | sed 's/\.gz$//' | sort -u | tr '\n' ' '))" >&2
  exit 2
fi
prog=$1
shift

# Compressed files (bin/*.gz, lib/*.gz) are unpacked once, into the bundle or, when it is read-only, into
# a cache directory.
cache=$here
if ! { touch "$here/.w" && rm -f "$here/.w"; } 2> /dev/null; then
  cache="${TMPDIR:-/tmp}/braid-gpu-bundle-$(id -u)-$(cksum < "$here/MANIFEST" | cut -d' ' -f1)"
fi
for gz in "$here"/bin/*.gz "$here"/lib/*.gz; do
  [ -f "$gz" ] || continue
  dir="$cache/$(basename "$(dirname "$gz")")"
  target="$dir/$(basename "$gz" .gz)"
  [ -f "$target" ] && continue
  mkdir -p "$dir"
  if command -v gzip > /dev/null 2>&1; then
    gzip -dc "$gz" > "$target.tmp"
  elif command -v python3 > /dev/null 2>&1; then
    python3 -c 'import gzip,shutil,sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$gz" "$target.tmp"
  else
    echo "run.sh: need gzip or python3 to unpack $gz" >&2
    exit 1
  fi
  chmod +x "$target.tmp"
  mv "$target.tmp" "$target"
done
for d in "$here/bin" "$cache/bin"; do
  if [ -f "$d/$prog" ]; then
    prog="$d/$prog"
    break
  fi
done
libpath="$here/lib"
[ "$cache" != "$here" ] && libpath="$cache/lib:$libpath"

# The driver's libcuda.so.1 (never carried): where ldconfig knows it, else the usual places.
driver_dir=""
candidates=$(ldconfig -p 2> /dev/null | awk '/libcuda\.so\.1 .*x86-64/ { print $NF }' | sed 's#/[^/]*$##')
for d in $candidates /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /lib64 /usr/local/nvidia/lib64 \
         /usr/local/nvidia/lib /usr/lib/wsl/lib /run/opengl-driver/lib; do
  if [ -e "$d/libcuda.so.1" ]; then
    driver_dir=$d
    break
  fi
done
if [ -n "$driver_dir" ]; then
  libpath="$libpath:$driver_dir"
else
  echo "run.sh: warning: libcuda.so.1 not found on this machine; CUDA will report no driver" >&2
fi

# cuBLAS and the like (MACHINE_LIBS, never carried): the CUDA toolkit, ldconfig, or the nvidia-* wheels of
# a Python environment (PyTorch's).
while read -r soname; do
  [ -n "$soname" ] || continue
  found=""
  wheel_dirs=$(python3 -c 'import glob, site, sys; [print(d) for p in site.getsitepackages() + sys.path for d in glob.glob(p + "/nvidia/*/lib")]' 2> /dev/null || true)
  for d in $(ldconfig -p 2> /dev/null | awk -v s="$soname" '$1 == s { print $NF }' | sed 's#/[^/]*$##') \
           /usr/local/cuda/lib64 /usr/local/cuda/lib $wheel_dirs /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib; do
    if [ -e "$d/$soname" ]; then
      found=$d
      break
    fi
  done
  if [ -n "$found" ]; then
    case ":$libpath:" in *":$found:"*) ;; *) libpath="$libpath:$found" ;; esac
  else
    echo "run.sh: warning: $soname not found on this machine (CUDA toolkit or the nvidia wheels)" >&2
  fi
done < "$here/MACHINE_LIBS"
exec "$here/lib/ld-linux-x86-64.so.2" --library-path "$libpath" "$prog" "$@"
RUN
chmod +x "$out/run.sh"

(cd "$out" && find bin lib -type f -printf '%s\t%p\n' | sort -k2) > "$out/MANIFEST"
size=$(du -sb "$out" | cut -f1)
echo "bundle $out: $(( size >> 20 )) MiB, programs: $(ls "$out/bin" | sed 's/\.gz$//' | tr '\n' ' ')"
if (( size > max_mib << 20 )); then
  echo "$0: the bundle is over $max_mib MiB" >&2
  exit 1
fi
