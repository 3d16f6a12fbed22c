#!/usr/bin/env bash
# tokamak beside llama.cpp on the same GGUF file, same machine, same run (benchmark issue,
# item 3). Obtains llama.cpp from the PyPI sdist of llama-cpp-python (its vendor/llama.cpp),
# builds llama-server and llama-bench once per instruction-set level (Release, CPU only) into
# third_party_peers/ (git-ignored, never committed), builds tokamak from this tree into
# build-cmp/, then runs bench/compare/run_compare.py:
#   - offline batch 1: llama-bench pp512 / tg128 vs tokamak bench throughput --concurrency 1,
#     and the decode floor account: tokamak_ceilings (built with tokamak) after each repeat
#   - serving, both servers up with equivalent settings, one client (tokamak bench serve):
#     batch-1 latency, a concurrency sweep 1/4/16/32, the prefix-shared workload
#   - runs alternate A/B and repeat; tables of medians, min-max and tokamak / llama.cpp
#   - per-run JSON, server logs, summary.md and HTML reports under --out
#
# Usage: bench/compare.sh [--model GGUF] [--threads 2] [--repeats 3] [--quick]
#                         [--synthetic-1b q4_0|q8_0] [--out DIR] [--tokamak BINARY]
#                         [--llama-version 0.3.36] [--level native|avx2|avxvnni|avx512]
#                         [--peer-levels best|native|LIST] [--build-only]
#                         [run_compare.py flags...]
#   --model GGUF         the model both run (default: the default model in models/)
#   --synthetic-1b TYPE  instead: a random-weight model of Llama 3.2 1B's shape with the default
#                        model's tokenizer, made once into models/synthetic/ by
#                        `tokamak make-synthetic --shape 1b --type TYPE --tokenizer-from`
#   --quick              a smoke test of every step, under ~10 minutes with the default model
#   --level LEVEL        the instruction set both run: native (default: -march=native for
#                        llama.cpp, each its best level here), or avx2 / avxvnni, what a CPU
#                        without AVX-512 would run (Zen 2-3, Alder Lake and later client cores),
#                        or avx512, AVX-512 with VNNI and BF16 but no AMX (Ice Lake, Zen 4):
#                        llama.cpp built for it (GGML_NATIVE=OFF, AVX2 + FMA + F16C, then
#                        GGML_AVX_VNNI or GGML_AVX512*), into its own folder, and tokamak run with
#                        TOKAMAK_CPU_ISA=LEVEL. On the AMX guest llama.cpp's avxvnni and avx512
#                        builds decode faster than its native (AMX) one: docs/BENCHMARKS.md
#   --peer-levels LIST   llama.cpp built for each level of LIST (at --level native only), every
#                        build's llama-bench run offline, each offline metric taking llama.cpp's
#                        best build (its fastest build differs by machine and metric:
#                        docs/BENCHMARKS.md), and the build whose decode won most serves.
#                        Default "best": native plus avxvnni and avx512 where this CPU has them;
#                        "native" for the one build
#   --build-only         fetch and build llama.cpp and tokamak, run nothing
#   --tokamak BINARY     use this tokamak instead of building build-cmp/tokamak
#   other flags go to run_compare.py (--sweep 1,4,16 --input-len 256 --workloads sweep
#   --skip-offline --llama-omp default ...; `python3 bench/compare/run_compare.py --help`
#   lists them). llama.cpp's OpenMP threads run with GOMP_SPINCOUNT=10000 (spin briefly,
#   then sleep, as tokamak's pool does) unless --llama-omp default|passive: with libgomp's
#   long default spin, any other load on the cores costs llama.cpp several-fold (see
#   llama_env in bench/compare/run_compare.py).
# Environment: JOBS (build jobs, default 2).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

MODEL=""
THREADS=2
REPEATS=3
QUICK=()
SYNTH=""
OUT=""
TOKAMAK=""
LLAMA_VERSION=0.3.36
BUILD_ONLY=0
LEVEL=native
PEER_LEVELS=""
PASS=()
JOBS=${JOBS:-2}

while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --quick) QUICK=(--quick); shift ;;
    --synthetic-1b) SYNTH="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --tokamak) TOKAMAK="$2"; shift 2 ;;
    --llama-version) LLAMA_VERSION="$2"; shift 2 ;;
    --build-only) BUILD_ONLY=1; shift ;;
    --level) LEVEL="$2"; shift 2 ;;
    --peer-levels) PEER_LEVELS="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^# Environment/p' "$0" | cut -c3-; exit 0 ;;
    *) PASS+=("$1"); shift ;;
  esac
done

log() { printf '[compare.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

PEERS="$ROOT/third_party_peers"
SDIST_DIR="$PEERS/llama_cpp_python-$LLAMA_VERSION"
LLAMA_SRC="$SDIST_DIR/vendor/llama.cpp"
LLAMA_BUILD_BASE="$PEERS/llama.cpp-build-$LLAMA_VERSION"
# On a CPU with AMX, -march=native builds ggml's AMX matmuls, whose tile configuration is a
# local struct handed to _tile_loadconfig. GCC 12's intrinsic (Debian 12's compiler) declares
# only 8 of its 64 bytes as read, so the stores that fill the rest are dropped and ldtilecfg
# faults: llama-bench and llama-server die on their first batch (seen on the AMX guest,
# 2026-12-04). clang builds the same sources correctly, so with AMX the peer is built with it
# (into its own folder), which keeps llama.cpp's strongest CPU path in the comparison.
# llama_config LEVEL: the flags (LLAMA_ISA, LLAMA_CC) and folder (LLAMA_BUILD) of llama.cpp
# built for LEVEL.
llama_config() {
  LLAMA_CC=()
  LLAMA_ISA=(-DGGML_NATIVE=ON)
  LLAMA_BUILD="$LLAMA_BUILD_BASE"
  case "$1" in
    native)
      if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null && command -v clang++ >/dev/null; then
        LLAMA_CC=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
        LLAMA_BUILD="$LLAMA_BUILD-clang"
      fi
      ;;
    avx2|avxvnni|avx512)
      local vnni=OFF avx512=OFF
      [ "$1" = avxvnni ] && vnni=ON
      [ "$1" = avx512 ] && avx512=ON
      LLAMA_ISA=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
        -DGGML_AVX_VNNI=$vnni -DGGML_AVX512=$avx512 -DGGML_AVX512_VNNI=$avx512
        -DGGML_AVX512_BF16=$avx512 -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
      LLAMA_BUILD="$LLAMA_BUILD-$1"
      ;;
    *) log "unknown level '$1' (native, avx2, avxvnni or avx512)"; exit 1 ;;
  esac
}

# The peer's builds: LEVEL's alone, or at the native level each level of --peer-levels
# ("best", the default: native and every other one this CPU runs that is not plain AVX2).
if [ "$LEVEL" != native ]; then
  [ -n "$PEER_LEVELS" ] && { log "--peer-levels goes with --level native only"; exit 1; }
  PEER_LEVELS="$LEVEL"
  export TOKAMAK_CPU_ISA="$LEVEL"
elif [ -z "$PEER_LEVELS" ] || [ "$PEER_LEVELS" = best ]; then
  PEER_LEVELS=native
  grep -qw avx_vnni /proc/cpuinfo 2>/dev/null && PEER_LEVELS="$PEER_LEVELS,avxvnni"
  grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null && PEER_LEVELS="$PEER_LEVELS,avx512"
fi
IFS=, read -r -a PEER_LEVEL_LIST <<<"$PEER_LEVELS"
llama_config "${PEER_LEVEL_LIST[0]}"
LLAMA_SERVER="$LLAMA_BUILD/bin/llama-server"
LLAMA_BENCH="$LLAMA_BUILD/bin/llama-bench"

# llama.cpp's sources from the llama-cpp-python sdist, built once for the level llama_config
# set; a second run finds the binaries and skips all of it.
build_llamacpp() {
  if [ -x "$LLAMA_BUILD/bin/llama-server" ] && [ -x "$LLAMA_BUILD/bin/llama-bench" ]; then
    log "llama.cpp $LLAMA_VERSION: using $LLAMA_BUILD/bin"
    return
  fi
  mkdir -p "$PEERS"
  if [ ! -f "$LLAMA_SRC/CMakeLists.txt" ]; then
    local tarball="$PEERS/llama_cpp_python-$LLAMA_VERSION.tar.gz"
    if [ ! -f "$tarball" ]; then
      log "downloading the sdist of llama-cpp-python==$LLAMA_VERSION from PyPI"
      python3 -m pip download --quiet --no-binary :all: --no-deps \
        "llama-cpp-python==$LLAMA_VERSION" -d "$PEERS"
    fi
    tar xzf "$tarball" -C "$PEERS"
  fi
  local server_dir=""
  for d in tools/server examples/server; do
    [ -f "$LLAMA_SRC/$d/CMakeLists.txt" ] && server_dir="$d" && break
  done
  local targets=(llama-bench)
  local server_flags=(-DLLAMA_BUILD_SERVER=OFF)
  if [ -n "$server_dir" ]; then
    targets+=(llama-server)
    # The web UI's built assets are not in the sdist (only its Svelte sources): build the
    # server without an embedded UI and never try to download one.
    server_flags=(-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
      -DLLAMA_BUILD_WEBUI=OFF)
  else
    log "WARNING: this sdist has no llama-server sources; building llama-bench only"
  fi
  local t0=$SECONDS
  log "building ${targets[*]} of llama.cpp $LLAMA_VERSION (-j$JOBS, log: $LLAMA_BUILD.log)"
  {
    cmake -S "$LLAMA_SRC" -B "$LLAMA_BUILD" -DCMAKE_BUILD_TYPE=Release "${LLAMA_ISA[@]}" "${LLAMA_CC[@]}" \
      -DGGML_CUDA=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF "${server_flags[@]}"
    cmake --build "$LLAMA_BUILD" -j"$JOBS" --target "${targets[@]}"
  } >"$LLAMA_BUILD.log" 2>&1 || { tail -30 "$LLAMA_BUILD.log" >&2; exit 1; }
  log "llama.cpp built in $((SECONDS - t0)) s"
}

build_tokamak() {
  if [ -n "$TOKAMAK" ]; then return; fi
  TOKAMAK="$ROOT/build-cmp/tokamak"
  log "building tokamak (Release) in build-cmp/"
  cmake -S "$ROOT" -B "$ROOT/build-cmp" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$ROOT/build-cmp" -j"$JOBS" --target tokamak >"$ROOT/build-cmp/build.log" 2>&1 ||
    { tail -30 "$ROOT/build-cmp/build.log" >&2; exit 1; }
  # The read ceilings of the decode floor account (absent where Google Benchmark is).
  cmake --build "$ROOT/build-cmp" -j"$JOBS" --target tokamak_ceilings >>"$ROOT/build-cmp/build.log" 2>&1 ||
    log "no tokamak_ceilings: the offline tables come without the decode floor account"
  "$TOKAMAK" bench serve --help >/dev/null 2>&1 ||
    { log "this tokamak has no 'bench serve'"; exit 1; }
}

# Every level's build benches offline, the best figure of each metric counting as llama.cpp's;
# run_compare.py serves with the first one's llama-server unless another build's decode won.
ALSO=()
for level in "${PEER_LEVEL_LIST[@]}"; do
  llama_config "$level"
  build_llamacpp
  [ "$LLAMA_BUILD/bin/llama-bench" = "$LLAMA_BENCH" ] || ALSO+=(--llama-bench-also "$LLAMA_BUILD/bin/llama-bench")
done
[ -x "$LLAMA_SERVER" ] || { log "no llama-server: the serving comparison is skipped"; PASS+=(--skip-serve); }
build_tokamak
[ "$BUILD_ONLY" = 1 ] && exit 0

DEFAULT_MODEL="$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -n "$SYNTH" ]; then
  MODEL="$ROOT/models/synthetic/llama-1b-shape.$SYNTH.gguf"
  if [ ! -f "$MODEL" ]; then
    "$TOKAMAK" make-synthetic --help >/dev/null 2>&1 ||
      { log "this tokamak has no 'make-synthetic'"; exit 1; }
    [ -f "$DEFAULT_MODEL" ] || scripts/fetch_model.sh  # the tokenizer's source
    mkdir -p "$ROOT/models/synthetic"
    log "making $MODEL"
    "$TOKAMAK" make-synthetic --shape 1b --type "$SYNTH" --tokenizer-from "$DEFAULT_MODEL" \
      -o "$MODEL"
  fi
fi
if [ -z "$MODEL" ]; then
  MODEL="$DEFAULT_MODEL"
  [ -f "$MODEL" ] || scripts/fetch_model.sh
fi
[ -f "$MODEL" ] || { log "no model file $MODEL"; exit 1; }

if [ -z "$OUT" ]; then
  OUT="$ROOT/build-cmp/results/$(date +%Y%m%d-%H%M%S)-$(basename "$MODEL" .gguf)"
fi
exec python3 bench/compare/run_compare.py --model "$MODEL" --tokamak "$TOKAMAK" \
  --llama-server "$LLAMA_SERVER" --llama-bench "$LLAMA_BENCH" --out "$OUT" \
  --threads "$THREADS" --repeats "$REPEATS" "${ALSO[@]}" "${QUICK[@]}" "${PASS[@]}"
