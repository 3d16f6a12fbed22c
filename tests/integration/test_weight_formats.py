"""The 5-bit and K-quant weight types read and written as GGUF defines them, checked against
gguf-py (the llama.cpp project's own Python reader of the format, from PyPI), an
implementation independent of ours:

- every tensor `tokamak quantize` writes in Q5_0, Q5_1, Q4_K, Q5_K or Q6_K decodes in gguf-py
  to exactly the floats tokamak decodes it to (`tokamak quantize FILE OUT f32`);
- the 32-element types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) are encoded as GGML's reference
  encoder does, byte for byte;
- a K-quant file of a shape whose rows are not whole 256-element super-blocks falls back to
  Q5_0 / Q5_1 / Q8_0 as llama-quantize does, and the model still serves.

These drive the real binary as a user would (make-synthetic, quantize, serve).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import gguf
import numpy as np
import pytest
import requests

from conftest import TOKAMAK_BIN, RunningServer

TYPES = {
    "q5_0": gguf.GGMLQuantizationType.Q5_0,
    "q5_1": gguf.GGMLQuantizationType.Q5_1,
    "q4_k": gguf.GGMLQuantizationType.Q4_K,
    "q5_k": gguf.GGMLQuantizationType.Q5_K,
    "q6_k": gguf.GGMLQuantizationType.Q6_K,
}
FALLBACK = {"q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}


def run(*args) -> str:
    r = subprocess.run([str(TOKAMAK_BIN), *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stderr


def tensors(path: Path) -> dict[str, gguf.ReaderTensor]:
    return {t.name: t for t in gguf.GGUFReader(path).tensors}


def decoded(t: gguf.ReaderTensor) -> np.ndarray:
    """The tensor's elements as float32, flat, in gguf-py's decoding."""
    if t.tensor_type == gguf.GGMLQuantizationType.F32:
        return np.asarray(t.data, dtype=np.float32).reshape(-1)
    return gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(-1)


@pytest.fixture(scope="module")
def f32_model(tmp_path_factory) -> Path:
    """A small random model in F32, 256 wide so that every matrix is whole super-blocks."""
    path = tmp_path_factory.mktemp("formats") / "f32.gguf"
    run("make-synthetic", "-o", path, "--shape", "tiny", "--n-embd", "256", "--n-ff", "512",
        "--type", "f32", "--embedding-type", "f32", "--seed", "7")
    return path


@pytest.mark.parametrize("name", sorted(TYPES))
def test_decoding_matches_gguf_py(f32_model: Path, tmp_path: Path, name: str):
    quantized = tmp_path / f"{name}.gguf"
    back = tmp_path / f"{name}.f32.gguf"
    run("quantize", f32_model, quantized, name)
    run("quantize", quantized, back, "f32")
    ours = tensors(back)
    checked = 0
    for tname, t in tensors(quantized).items():
        if t.tensor_type != TYPES[name]:
            continue
        theirs = decoded(t)
        mine = decoded(ours[tname])
        assert mine.shape == theirs.shape, tname
        np.testing.assert_array_equal(mine, theirs, err_msg=f"{name} {tname}")
        checked += 1
    # Every matrix: 2 layers x 7 and token_embd (tied head) or output.
    assert checked >= 15, f"only {checked} {name} tensors in the file"


@pytest.mark.parametrize("name", ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0"])
def test_32_element_encoding_is_ggml_reference(f32_model: Path, tmp_path: Path, name: str):
    quantized = tmp_path / f"{name}.gguf"
    run("quantize", f32_model, quantized, name)
    qtype = getattr(gguf.GGMLQuantizationType, name.upper())
    source = tensors(f32_model)
    checked = 0
    for tname, t in tensors(quantized).items():
        if t.tensor_type != qtype:
            continue
        x = np.asarray(source[tname].data, dtype=np.float32)
        expected = gguf.quants.quantize(x, qtype)
        np.testing.assert_array_equal(np.asarray(t.data).reshape(-1), expected.reshape(-1),
                                      err_msg=f"{name} {tname}")
        checked += 1
    assert checked >= 15


@pytest.fixture(scope="module")
def narrow_model(tmp_path_factory) -> Path:
    """The tiny shape, 64 wide: no matrix row is a whole K-quant super-block."""
    path = tmp_path_factory.mktemp("narrow") / "f32.gguf"
    run("make-synthetic", "-o", path, "--shape", "tiny", "--type", "f32",
        "--embedding-type", "f32", "--seed", "3")
    return path


@pytest.mark.parametrize("name", sorted(FALLBACK))
def test_k_quant_falls_back_where_rows_are_not_super_blocks(narrow_model: Path, tmp_path: Path,
                                                            name: str):
    out = tmp_path / f"{name}.gguf"
    report = run("quantize", narrow_model, out, name)
    assert "in the fallback type" in report
    fallback = getattr(gguf.GGMLQuantizationType, FALLBACK[name].upper())
    matrices = [t for t in tensors(out).values() if len(t.shape) >= 2]
    assert matrices and all(t.tensor_type == fallback for t in matrices), \
        [(t.name, t.tensor_type) for t in matrices]


def test_k_quant_model_serves(f32_model: Path, tmp_path: Path):
    """A Q4_K model loads in `serve` and completes a request."""
    path = tmp_path / "q4_k.gguf"
    run("quantize", f32_model, path, "q4_k")
    srv = RunningServer([str(TOKAMAK_BIN), "serve", "--port", "0", "-m", str(path),
                         "--kv-tokens", "1024", "-t", "2"], None)
    try:
        srv.wait_ready()
        r = requests.post(srv.url("/v1/completions"),
                          json={"prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0,
                                "ignore_eos": True}, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] == 4
    finally:
        srv.stop()
