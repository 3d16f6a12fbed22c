#!/usr/bin/env python3
"""A Hugging Face tokenizer directory (tokenizer.json + tokenizer_config.json) made from the
tokenizer inside a GGUF file, for benchmark clients that count tokens with a HF tokenizer
(aiperf in bench/crosscheck.sh) on a machine that cannot download one.

Handles GPT-2 style byte-level BPE (tokenizer.ggml.model = "gpt2"), as in the default model
(pre-tokenizer "smollm": single digits, then GPT-2's split). Needs the PyPI packages gguf,
tokenizers and transformers (the cross-check's venv has them). Checks a few texts against
`tokamak tokenize` when --tokamak is given.

    python gguf_to_hf_tokenizer.py MODEL.gguf OUT_DIR [--tokamak build/tokamak]
"""
import argparse
import subprocess

from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

SAMPLES = ["The river wound through the valley, 123 émojis 🚀",
           "def f(x):\n    return x ** 2  # 3.14159\n\n\tend",
           "Ünïcödé 中文字符 and   spaces\r\n"]


def field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    if f.types and f.types[0].name == "ARRAY":
        return [f.contents(i) for i in range(len(f.data))]
    return f.contents()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--tokamak")
    a = ap.parse_args()

    r = GGUFReader(a.model)
    kind = field(r, "tokenizer.ggml.model")
    pre = field(r, "tokenizer.ggml.pre")
    if kind != "gpt2":
        raise SystemExit(f"{a.model}: tokenizer {kind!r}; only gpt2 (byte-level BPE) is handled")
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(r, "tokenizer.ggml.merges")]

    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges,
                               fuse_unk=False, byte_fallback=False))
    split = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    if pre in ("smollm", "starcoder", "refact"):
        split.insert(0, pre_tokenizers.Digits(individual_digits=True))
    elif pre not in ("default", "gpt2", None):
        print(f"warning: pre-tokenizer {pre!r} approximated by GPT-2's")
    tok.pre_tokenizer = pre_tokenizers.Sequence(split)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])

    def special(key):
        i = field(r, f"tokenizer.ggml.{key}_token_id")
        return tokens[i] if i is not None else None

    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=special("bos"),
                                   eos_token=special("eos"), unk_token=special("unknown"),
                                   pad_token=special("padding"))
    template = field(r, "tokenizer.chat_template")
    if template:
        fast.chat_template = template
    fast.save_pretrained(a.out)
    print(f"wrote {a.out}: {len(tokens)} tokens, {len(merges)} merges, pre-tokenizer {pre}")

    if a.tokamak:
        for text in SAMPLES:
            ours = fast(text, add_special_tokens=False)["input_ids"]
            out = subprocess.run([a.tokamak, "tokenize", "-m", a.model, "--ids-only", text],
                                 capture_output=True, text=True, check=True).stdout
            ref = [int(x) for x in out.split()]
            if ours != ref:
                raise SystemExit(f"mismatch on {text!r}:\n HF      {ours}\n tokamak {ref}")
        print(f"matches tokamak tokenize on {len(SAMPLES)} texts")


if __name__ == "__main__":
    main()
