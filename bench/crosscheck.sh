#!/usr/bin/env bash
# Cross-check of the benchmark client (benchmark issue, item 4): `tokamak bench serve` and an
# established client from PyPI, NVIDIA's aiperf, measure the same `tokamak serve` on the
# same configuration; TTFT, TPOT and output tokens/s must agree within 10%.
# Installs aiperf (pinned) into third_party_peers/venv-aiperf (git-ignored), exports the
# model's tokenizer from its GGUF file as a Hugging Face tokenizer directory for aiperf
# (nothing is downloaded from a model hub), builds tokamak from this tree into build-cmp/,
# then runs bench/compare/crosscheck.py (definitions and differences in its docstring).
#
# By default both clients run at the same time against the one server, each with half the
# concurrency, so that both measure the same server under the same load (--mode alternate:
# one after the other; aiperf's own CPU use then slows the server it measures).
#
# Usage: bench/crosscheck.sh [--model GGUF] [--tokamak BINARY] [--out DIR]
#                            [crosscheck.py flags: --mode together|alternate
#                             --input-len 128 --output-len 128 --range-ratio 0.5
#                             --concurrency 8 --num-prompts 32 --repeats 3 --threads 1]
# The server gets 1 kernel thread by default so that, on 2 cores, the clients have a core of
# their own: aiperf is several Python processes and takes seconds of CPU per run, which
# would otherwise slow the server it measures and show up as a client difference.
# Exit status 0 when every compared figure agrees within the tolerance, 1 when one does not.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

MODEL="$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
TOKAMAK=""
OUT=""
PASS=()
JOBS=${JOBS:-2}
AIPERF_PACKAGES=(aiperf==0.13.0 gguf==0.19.0)

while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --tokamak) TOKAMAK="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^# Exit status/p' "$0" | cut -c3-; exit 0 ;;
    *) PASS+=("$1"); shift ;;
  esac
done

log() { printf '[crosscheck.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

PEERS="$ROOT/third_party_peers"
VENV="$PEERS/venv-aiperf"
mkdir -p "$PEERS"
stamp="$VENV/.packages"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${AIPERF_PACKAGES[*]}" ]; then
  log "installing ${AIPERF_PACKAGES[*]} into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${AIPERF_PACKAGES[@]}"
  echo "${AIPERF_PACKAGES[*]}" >"$stamp"
fi

if [ -z "$TOKAMAK" ]; then
  TOKAMAK="$ROOT/build-cmp/tokamak"
  log "building tokamak (Release) in build-cmp/"
  cmake -S "$ROOT" -B "$ROOT/build-cmp" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$ROOT/build-cmp" -j"$JOBS" --target tokamak >"$ROOT/build-cmp/build.log" 2>&1 ||
    { tail -30 "$ROOT/build-cmp/build.log" >&2; exit 1; }
fi
[ -f "$MODEL" ] || scripts/fetch_model.sh

TOKENIZER="$PEERS/tokenizer-$(basename "$MODEL" .gguf)"
if [ ! -f "$TOKENIZER/tokenizer.json" ]; then
  log "exporting the tokenizer of $MODEL to $TOKENIZER"
  "$VENV/bin/python" bench/compare/gguf_to_hf_tokenizer.py "$MODEL" "$TOKENIZER" \
    --tokamak "$TOKAMAK"
fi

[ -n "$OUT" ] || OUT="$ROOT/build-cmp/results/crosscheck-$(date +%Y%m%d-%H%M%S)"
exec python3 bench/compare/crosscheck.py --tokamak "$TOKAMAK" --aiperf "$VENV/bin/aiperf" \
  --tokenizer "$TOKENIZER" --model "$MODEL" --out "$OUT" "${PASS[@]}"
