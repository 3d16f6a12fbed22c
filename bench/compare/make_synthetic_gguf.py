#!/usr/bin/env python3
"""A random-weight GGUF model with the shape of a 1B llama, for speed comparisons where the
weight values do not matter (bench/compare.sh --synthetic-1b q4_0|q8_0).

A stop-gap: the project's own GGUF writer (src/model/synthetic_model.h) has no command-line
entry yet. Python standard library only. The tokenizer (metadata tokenizer.*) is copied
from a real GGUF file, the default model's by default (GPT-2 style BPE, 49,152 tokens), so
prompts tokenize as usual; the transformer has Llama 3.2 1B's shape (16 layers, width 2048,
32 heads of 64, 8 KV heads, FFN 8192, tied output head): 1.07 B parameters with this
vocabulary. Matrices are Q4_0 or Q8_0 (token_embd, also the output head, Q8_0 as in the
default model), norms F32 ones. Quantized values are uniform random with one scale chosen
so that every weight has variance 1/fan_in, as src/model/synthetic_model.cpp does.

    python3 bench/compare/make_synthetic_gguf.py --type q4_0 --out models/synthetic/x.gguf
"""
import argparse
import math
import os
import struct

GGUF_MAGIC = b"GGUF"
ALIGN = 32
# GGUF metadata value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
# ggml tensor types, with (block elements, block bytes)
GGML_F32, GGML_Q4_0, GGML_Q8_0 = 0, 2, 8
BLOCK = {GGML_F32: (1, 4), GGML_Q4_0: (32, 18), GGML_Q8_0: (32, 34)}
FILE_TYPE = {"q4_0": (GGML_Q4_0, 2), "q8_0": (GGML_Q8_0, 7)}


# --- reading the metadata of the tokenizer's source -------------------------------------

def _read_value(f, t):
    if t in SCALAR:
        fmt = SCALAR[t]
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
    if t == STR:
        (n,) = struct.unpack("<Q", f.read(8))
        return f.read(n)
    if t == ARR:
        (et, n) = struct.unpack("<IQ", f.read(12))
        return (et, [_read_value(f, et) for _ in range(n)])
    raise ValueError(f"unknown GGUF value type {t}")


def read_metadata(path):
    """[(key, type, value)] of a GGUF file; strings stay bytes, arrays (elem_type, list)."""
    with open(path, "rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise ValueError(f"{path}: not a GGUF file")
        version, _n_tensors, n_kv = struct.unpack("<IQQ", f.read(20))
        if version != 3:
            raise ValueError(f"{path}: GGUF version {version}, expected 3")
        out = []
        for _ in range(n_kv):
            key = _read_value(f, STR).decode()
            (t,) = struct.unpack("<I", f.read(4))
            out.append((key, t, _read_value(f, t)))
        return out


# --- writing -----------------------------------------------------------------------------

def _write_value(f, t, v):
    if t in SCALAR:
        f.write(struct.pack(SCALAR[t], v))
    elif t == STR:
        b = v.encode() if isinstance(v, str) else v
        f.write(struct.pack("<Q", len(b)) + b)
    elif t == ARR:
        et, items = v
        f.write(struct.pack("<IQ", et, len(items)))
        if et in SCALAR:
            f.write(struct.pack("<" + SCALAR[et][1] * len(items), *items))
        else:
            for x in items:
                _write_value(f, et, x)
    else:
        raise ValueError(f"unknown GGUF value type {t}")


def f16_bytes(x):
    return struct.pack("<e", x)


def quantized(ggml_type, n_elems, fan_in):
    """Random blocks of one scale: uniform quants whose weights have variance 1/fan_in."""
    nb = n_elems // 32
    qk_bytes = 16 if ggml_type == GGML_Q4_0 else 32
    # E[q^2] of uniform quants: Q4_0 values q - 8, q in 0..15: 21.5; Q8_0 int8: ~5461.
    mean_sq = 21.5 if ggml_type == GGML_Q4_0 else 5461.5
    d = f16_bytes(1.0 / math.sqrt(mean_sq * fan_in))
    stride = 2 + qk_bytes
    out = bytearray(nb * stride)
    out[0::stride] = d[0:1] * nb
    out[1::stride] = d[1:2] * nb
    rnd = os.urandom(nb * qk_bytes)
    for k in range(qk_bytes):
        out[2 + k::stride] = rnd[k::qk_bytes]
    return out


def ones_f32(n):
    return struct.pack("<f", 1.0) * n


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--type", choices=sorted(FILE_TYPE), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer-from", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--embd", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--ff", type=int, default=8192)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--rope-base", type=float, default=500000.0)
    a = ap.parse_args()

    wtype, file_type = FILE_TYPE[a.type]
    src = read_metadata(a.tokenizer_from)
    tok = [(k, t, v) for k, t, v in src if k.startswith("tokenizer.")]
    vocab = len(next(v for k, t, v in tok if k == "tokenizer.ggml.tokens")[1])
    hd = a.embd // a.heads

    meta = [
        ("general.architecture", STR, "llama"),
        ("general.name", STR, f"synthetic llama-1b-shape {a.type}"),
        ("general.file_type", U32, file_type),
        ("llama.context_length", U32, a.ctx),
        ("llama.embedding_length", U32, a.embd),
        ("llama.block_count", U32, a.layers),
        ("llama.feed_forward_length", U32, a.ff),
        ("llama.attention.head_count", U32, a.heads),
        ("llama.attention.head_count_kv", U32, a.kv_heads),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("llama.rope.freq_base", F32, a.rope_base),
        ("llama.rope.dimension_count", U32, hd),
        ("llama.vocab_size", U32, vocab),
    ] + tok

    # (name, GGUF shape innermost first, type, fan_in or None for a norm)
    tensors = [("token_embd.weight", [a.embd, vocab], GGML_Q8_0, a.embd)]
    for i in range(a.layers):
        p = f"blk.{i}."
        tensors += [
            (p + "attn_norm.weight", [a.embd], GGML_F32, None),
            (p + "attn_q.weight", [a.embd, a.heads * hd], wtype, a.embd),
            (p + "attn_k.weight", [a.embd, a.kv_heads * hd], wtype, a.embd),
            (p + "attn_v.weight", [a.embd, a.kv_heads * hd], wtype, a.embd),
            (p + "attn_output.weight", [a.heads * hd, a.embd], wtype, a.heads * hd),
            (p + "ffn_norm.weight", [a.embd], GGML_F32, None),
            (p + "ffn_gate.weight", [a.embd, a.ff], wtype, a.embd),
            (p + "ffn_up.weight", [a.embd, a.ff], wtype, a.embd),
            (p + "ffn_down.weight", [a.ff, a.embd], wtype, a.ff),
        ]
    tensors.append(("output_norm.weight", [a.embd], GGML_F32, None))

    def nbytes(shape, t):
        n = math.prod(shape)
        be, bb = BLOCK[t]
        assert n % be == 0 and shape[0] % be == 0
        return n // be * bb

    def pad(n):
        return -(-n // ALIGN) * ALIGN

    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(meta)))
        for k, t, v in meta:
            _write_value(f, STR, k)
            f.write(struct.pack("<I", t))
            _write_value(f, t, v)
        offset = 0
        for name, shape, t, _ in tensors:
            _write_value(f, STR, name)
            f.write(struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape))
            f.write(struct.pack("<IQ", t, offset))
            offset = pad(offset + nbytes(shape, t))
        f.write(b"\0" * (pad(f.tell()) - f.tell()))
        for name, shape, t, fan_in in tensors:
            data = ones_f32(shape[0]) if t == GGML_F32 else quantized(t, math.prod(shape), fan_in)
            assert len(data) == nbytes(shape, t)
            f.write(data)
            f.write(b"\0" * (pad(len(data)) - len(data)))
    os.replace(tmp, a.out)
    params = sum(math.prod(s) for _, s, _, _ in tensors)
    print(f"wrote {a.out}: {params / 1e9:.2f} B parameters, {os.path.getsize(a.out) / 2**20:.0f} "
          f"MiB, {a.layers} layers x {a.embd}, {a.heads}/{a.kv_heads} heads, FFN {a.ff}, "
          f"vocab {vocab} ({a.type})")


if __name__ == "__main__":
    main()
