#!/usr/bin/env bash
# Runs every test: the unit and model tests of the Release build, the integration tests of
# the HTTP server (pytest, tests/integration), then the unit tests again
# in a second build with AddressSanitizer + UndefinedBehaviorSanitizer and asserts on (any
# report or failed assert fails).
# Expects scripts/setup.sh to have run (the README's test command does both).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== Release build: all tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
# The golden tests also cover Q8_0 and F16 versions of the default model, made from it by
# `tokamak quantize` (deterministic; the golden files record their sha256).
for t in Q8_0 F16; do
  f=models/SmolLM2-135M-Instruct.$t.gguf
  [ -f "$f" ] || ./build/tokamak quantize models/SmolLM2-135M-Instruct.Q4_1.gguf "$f" "$t"
done
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== Integration tests: the real server with the default model, driven over HTTP"
# The openai client, raw HTTP, a Prometheus parser, a load test and a headless Chromium.
TOKAMAK_BIN="$PWD/build/tokamak" .venv/bin/python -m pytest -q tests/integration

echo "== ASan+UBSan build: unit tests"
# Debug keeps the asserts on (every precondition a caller could break); -O1 -g1 compiles in
# about half the time of -O2 -g and still gives stack traces with line numbers.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DTOKAMAK_SANITIZE=ON -DTOKAMAK_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
# Tests on the full default model are slow under the sanitizers and exercise the same code
# as the tiny-model tests; they run in the Release build above.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j"$jobs" -E 'DefaultModel|GoldenGeneration'
