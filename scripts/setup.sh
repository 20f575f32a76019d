#!/usr/bin/env bash
# Installs every build and test dependency of braid from Debian's apt.
# Idempotent: when everything is present it prints nothing and exits 0.
set -euo pipefail

packages=(
  build-essential cmake pkg-config python3
  libspdlog-dev libfmt-dev libcli11-dev catch2
  libopenblas-dev
  libopenmpi-dev openmpi-bin
  libgloo-dev libucx-dev
  libboost-dev libboost-system-dev
  libbenchmark-dev
  nlohmann-json3-dev
  libyaml-cpp-dev
  libssl-dev
  libisal-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
