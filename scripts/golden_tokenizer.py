#!/usr/bin/env python3
"""Golden tokenizer data from the reference (llama.cpp through llama-cpp-python).

For each model, tokenizes a fixed set of strings (a hand-written list plus strings drawn by a
seeded generator, so every run gives the same set) with llama.cpp and writes the expected ids
to a JSON fixture that tests/tokenizer/golden_test.cpp compares against:

  {
    "model": "<file name>", "model_sha256": "<hex>", "reference": "llama-cpp-python <version>",
    "cases": [
      {"text": "<string>"            # or "hex": "<bytes>" when the input is not valid UTF-8
       "ids": [...],                 # add_special=false, parse_special=false
       "ids_special": [...],         # parse_special=true (subset: special-looking text, ...)
       "ids_add_special": [...],     # add_special=true (subset)
       "lossless": true}             # decode(encode(s)) must give s back (per the reference)
    ]
  }

Usage:
  scripts/golden_tokenizer.py                 # all fixtures, default paths
                                              # (smollm2.json, stories260k.json, and
                                              # pre_tokenizers.json: the GPT-2 vocabulary
                                              # under each pre-tokenizer family)
  scripts/golden_tokenizer.py --model M --out tests/golden/tokenizer/x.json [--count N]
"""

import argparse
import hashlib
import json
import os
import random
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")

DEFAULT_JOBS = [
    (os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
     os.path.join(ROOT, "tests", "golden", "tokenizer", "smollm2.json")),
    (os.path.join(SHARED, "testdata", "stories260K.gguf"),
     os.path.join(ROOT, "tests", "golden", "tokenizer", "stories260k.json")),
]

# ---------------------------------------------------------------------------------------------
# Hand-written cases: each one exercises a rule of some pre-tokenizer or of the BPE itself.

HAND_WRITTEN = [
    # empty, whitespace
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", "\t\t\t", " \t \n \r\n  ",
    "a  b", "a   b", "a\tb", "a\nb", "a\n\nb", "a \n b", "  leading", "trailing  ", "   both   ",
    "line one\nline two\n\nline four\n", "\n\n\n\n\n\n\n\n", " " * 40, "\t" * 17, "x" + " " * 33 + "y",
    "mixed \t\n\r\n \t whitespace", "tab\tseparated\tvalues\t1\t2\t3",
    # prose
    "Hello world", " Hello world", "Hello World", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
    "Once upon a time, there was a little girl named Lily.",
    "It was the best of times, it was the worst of times.",
    "SmolLM2 is a family of compact language models available in three sizes: 135M, 360M, and 1.7B parameters.",
    "ALL CAPS SENTENCE WITH SHOUTING!!!", "camelCaseIdentifier and PascalCaseName and snake_case_name",
    # contractions
    "I'm", "you're", "they've", "he'll", "she'd", "it's", "don't", "can't", "won't", "shouldn't've",
    "I'M", "YOU'RE", "THEY'VE", "HE'LL", "SHE'D", "IT'S", "DON'T", "It'S", "We'Re", "y'all",
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "''s", "'''", "rock'n'roll", "O'Neil's", "the dog's bone",
    "'tis the season", "don't you think it's 'quoted'?", "I've been 'told' he's there, 'RE you sure?",
    "`backtick` and ‘curly’ and “double”",
    # digits and numbers
    "0", "7", "42", "123", "1234", "12345", "1234567", "12345678901234567890", "3.14159", "1,000,000",
    "1e-10", "-273.15", "+1 (555) 010-9999", "v1.2.3", "0x1F", "0b1010", "2024-06-01T12:34:56Z",
    "٣٤٥", "१२३", "²³", "½ ¾", "Ⅻ", "①②③", "123abc456", "abc123def", "$100.00", "50%", "#1",
    "π ≈ 3.14159265358979323846264338327950288419716939937510",
    # punctuation
    "!!!", "???", "...", "!?!?", "---", "===", "<<>>", "->", "=>", "::", "&&", "||", "/*", "*/",
    "—–-", "«guillemets»", "¿Qué?", "¡Hola!", "(parens) [brackets] {braces}", "\"quotes\"",
    "#$%&*+/<=>@\\^_`|~", "a.b.c", "a,b,c", "end.", "...and so on", "Wait... what?!",
    # unicode scripts
    "café naïve résumé", "Äpfel Straße Übermut", "ελληνικά γράμματα", "Привет, мир!", "Здравствуйте",
    "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "안녕하세요 세계", "こんにちは世界",
    "カタカナ", "你好，世界！", "中文测试：标点符号。", "繁體中文測試", "Tiếng Việt có dấu",
    "ქართული", "Հայերեն", "ትግርኛ", "ᠮᠣᠩᠭᠣᠯ", "ꦗꦮ", "ᐃᓄᒃᑎᑐᑦ",
    "ied 4 ½ months", "Führer", "Ⓐⓑⓒ", "ＡＢＣ１２３ｘｙｚ", "ﬁﬂﬀ", "Ǆǅǆ", "ǈ title case",
    # combining marks, normalization
    "e\u0301", "a\u0308\u0304", "n\u0303o", "Z\u0351\u0367\u0337a\u0364\u035dl\u0313g\u0350o\u0308",
    "\u0301 alone", "Åström vs A\u030astro\u0308m", "க்ஷ", "द्‍ध", "ผู้หญิง",
    # emoji
    "👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇫🇷🇯🇵", "❤️", "✅ done", "🙂🙃😉", "🚀 launch 🚀",
    "🦙🦙🦙", "1️⃣2️⃣", "👩🏾‍💻 coding", "🫠", "emoji😀in😀text",
    # special spaces and invisible characters
    "a\u00a0b", "a\u2003b", "a\u3000b", "a\u2028b", "a\u2029b", "a\u0085b", "a\u200bb", "\ufeffBOM",
    "a\u200db", "a\u200eb", "a\u202fb", "a\u180eb", "\u00a0\u00a0", " \u00a0 ", "\u3000\u3000x",
    # control characters
    "\x00", "\x01\x02\x03", "\x7f", "\x1b[31mred\x1b[0m", "bell\x07", "a\x0bb", "a\x0cb",
    "\x1c\x1d\x1e\x1f",
    # valid but unusual code points
    "\ufffd", "\uffff", "\ufffe", "\ue000", "\U0010ffff", "\U000f0000", "\U0001d54f", "\U00020000",
    "\u0378", "\U000e0001", "\U0001f9ff",
    # code
    "def main():\n    print(\"hello\")\n\nif __name__ == \"__main__\":\n    main()\n",
    "for i in range(10):\n\tif i % 2 == 0:\n\t\tcontinue\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "template <typename T> auto f(T&& x) -> decltype(auto) { return std::forward<T>(x); }",
    "const add = (a, b) => a + b; // arrow\nconsole.log(`sum: ${add(1, 2)}`);",
    "fn main() { let v: Vec<u32> = (0..10).collect(); println!(\"{:?}\", v); }",
    "func main() {\n\tfmt.Println(\"hi\")\n}",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>",
    "{\"key\": [1, 2.5, true, null], \"nested\": {\"a\": \"b\"}}",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\"; done",
    "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
    "\\frac{a}{b} + \\sum_{i=1}^{n} x_i^2",
    "    indented four\n        indented eight\n",
    "x = [1,2,3]\ny = {'a':1}\n",
    # URLs, paths, addresses
    "https://example.com/path?query=1&b=two#frag", "http://localhost:8080/v1/chat/completions",
    "mailto:someone@example.org", "C:\\Users\\name\\file.txt", "/usr/bin/env python3", "~/.config/x",
    "user@example.com", "192.168.0.1:443", "[::1]:8080",
    # markdown
    "## Title\n- item one\n- item two\n\n**bold** and _italic_ and `code`",
    "| a | b |\n|---|---|\n| 1 | 2 |", "> quoted\n> text", "1. first\n2. second",
    # special-token text
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>user\nHello!<|im_end|>\n",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_end|>", "<|im_end|><|im_end|>", "<<|im_end|>>", " <|im_end|> ", "<|IM_END|>",
    "<|im_start", "im_start|>", "<|im_start|", "<repo_name>", "<reponame>x", "<filename>main.py<file_sep>",
    "<gh_stars>100", "<issue_start><issue_comment><issue_closed>", "<jupyter_code>print(1)<jupyter_output>",
    "<s>", "</s>", "<unk>", "<s>Hello</s>", "text <s> in </s> between <unk>", "<0x41>", "<0x0A>",
    "<|endoftext|>The end.<|endoftext|>",
    # SentencePiece space marker typed by the user
    "\u2581", "a\u2581b", "\u2581\u2581 x",
    # long
    "word " * 200,
    "a" * 1000,
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 20,
    "1234567890" * 50,
    "🙂" * 100,
]

# Inputs that are not valid UTF-8 (stored as hex). Sequences beyond U+10FFFF are left out:
# llama.cpp throws on them.
INVALID_BYTES = [
    b"\x80", b"\xff", b"\xfe\xff", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82a", b"\xf0\x9f\x98",
    b"abc\xf0\x9f\x98 def", b"\xc0\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80",
    b"a\xed\xb2\x80b", b"\xf8\x88\x80\x80\x80", b"Hello \xff world", b"\x80\x80\x80",
    b"valid \xe2\x82\xac then \xe2\x82 broken", b"\xf0\x9f\x98\x80\x80",
]

WORDS = """the of and to in is you that it he was for on are as with his they at be this have
from or one had by word but not what all were we when your can said there use an each which she
do how their if will up other about out many then them these so some her would make like him into
time has look two more write go see number no way could people my than first water been call who
oil its now find long down day did get come made may part model token language inference server
cache batch kernel tensor quantize stream attention transformer llama gguf tokenizer sequence
Hello World Python Rust JSON HTTP API GPU CPU Paris London Tokyo Monday January""".split()

ASCII_PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
WHITESPACE = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\t\n", "    ", "\u00a0", "\u3000"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL",
                "'D", "'Re", "'lL"]
SPECIAL_TEXTS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "<file_sep>",
                 "<s>", "</s>", "<unk>", "<|im_start", "im_end|>"]
EMOJI = ["😀", "👍", "👍🏽", "👨‍👩‍👧", "🏳️‍🌈", "🇩🇪", "❤️", "🔥", "✨", "🤖", "🦀", "🐍"]

# Code point ranges to draw single characters from (assigned ones only, see below).
RANGES = [
    (0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF), (0x600, 0x6FF),
    (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x2000, 0x206F),
    (0x20A0, 0x20CF), (0x2100, 0x218F), (0x2190, 0x22FF), (0x2500, 0x25FF), (0x2600, 0x27BF),
    (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF),
    (0x1F300, 0x1F64F), (0x1F900, 0x1F9FF), (0x20000, 0x2A6DF),
]


def assigned(cp):
    """Assigned in Unicode 14 (this Python's table, and PCRE2 10.42's) and not a surrogate."""
    return unicodedata.category(chr(cp)) not in ("Cn", "Cs")


def random_char(rng):
    while True:
        lo, hi = rng.choice(RANGES)
        cp = rng.randint(lo, hi)
        if assigned(cp):
            return chr(cp)


def random_piece(rng):
    kind = rng.random()
    if kind < 0.35:
        w = rng.choice(WORDS)
        r = rng.random()
        if r < 0.15:
            w = w.upper()
        elif r < 0.3:
            w = w.capitalize()
        return w
    if kind < 0.50:
        return rng.choice(WHITESPACE)
    if kind < 0.60:
        return "".join(rng.choice(ASCII_PUNCT) for _ in range(rng.randint(1, 4)))
    if kind < 0.68:
        return str(rng.randint(0, 10 ** rng.randint(1, 15)))
    if kind < 0.73:
        return rng.choice(CONTRACTIONS)
    if kind < 0.88:
        return "".join(random_char(rng) for _ in range(rng.randint(1, 6)))
    if kind < 0.94:
        return rng.choice(EMOJI)
    if kind < 0.97:
        return rng.choice(SPECIAL_TEXTS)
    return "".join(rng.choice("\u0300\u0301\u0308\u0327\u20dd") for _ in range(rng.randint(1, 3)))


def generated(count, seed=20240601):
    rng = random.Random(seed)
    out = []
    seen = set(HAND_WRITTEN)
    while len(out) < count:
        n = rng.choice([1, 1, 2, 3, 4, 6, 8, 12, 20, 40])
        s = ""
        for _ in range(n):
            piece = random_piece(rng)
            if s and rng.random() < 0.6 and not s[-1].isspace() and not piece[:1].isspace():
                s += " "
            s += piece
        if s in seen:
            continue
        seen.add(s)
        out.append(s)
    return out


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fnv1a64(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def build(model_path, out_path, count):
    try:
        import ctypes
        import llama_cpp
        from llama_cpp import Llama, __version__ as lcp_version
    except ImportError:
        sys.exit("golden_tokenizer.py: needs the llama-cpp-python package (pip install llama-cpp-python)")
    llm = Llama(model_path=model_path, vocab_only=True, verbose=False)
    is_spm = llm.metadata.get("tokenizer.ggml.model") == "llama"

    buf = ctypes.create_string_buffer(1024)
    vocab = llm._model.vocab

    def piece(token):  # llama_token_to_piece with special=True, no space stripped
        n = llama_cpp.llama_token_to_piece(vocab, llama_cpp.llama_token(token), buf, len(buf), 0, True)
        assert 0 <= n <= len(buf)
        return buf.raw[:n]

    # Every token's piece, hashed: 4-byte little-endian length + bytes, FNV-1a 64 over all.
    pieces_hash = 0xCBF29CE484222325
    for token in range(llm.n_vocab()):
        p = piece(token)
        pieces_hash = fnv1a64(len(p).to_bytes(4, "little") + p, pieces_hash)

    inputs = [(s, s.encode("utf-8")) for s in HAND_WRITTEN + generated(count)]
    inputs += [(None, b) for b in INVALID_BYTES]

    rng = random.Random(7)
    cases = []
    for text, data in inputs:
        case = {"text": text} if text is not None else {"hex": data.hex()}
        case["ids"] = llm.tokenize(data, add_bos=False, special=False)
        if b"<" in data or rng.random() < 0.1:
            case["ids_special"] = llm.tokenize(data, add_bos=False, special=True)
        if rng.random() < 0.1:
            case["ids_add_special"] = llm.tokenize(data, add_bos=True, special=False)
        # decode(encode(s)) == s where the reference's pieces give the text back (SentencePiece:
        # after the space it adds); not where bytes were dropped or U+2581 became a space.
        pieces = b"".join(piece(t) for t in case["ids"])
        expected = b" " + data if is_spm and data else data
        case["lossless"] = text is not None and pieces == expected
        cases.append(case)

    fixture = {
        "model": os.path.basename(model_path),
        "model_sha256": sha256(model_path),
        "reference": "llama-cpp-python " + lcp_version,
        "n_vocab": llm.n_vocab(),
        "pieces_fnv1a64": f"{pieces_hash:016x}",
        "cases": cases,
    }
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{out_path}: {len(cases)} cases, {os.path.getsize(out_path)} bytes")


# One name per distinct split-regex family (and aliases whose flags differ).
PRE_VARIANTS = ["default", "gpt-2", "llama3", "dbrx", "chatglm-bpe", "deepseek-llm",
                "deepseek-coder", "deepseek-v3", "falcon", "smollm", "qwen2", "qwen35", "bloom",
                "viking", "tekken", "gpt-4o", "seed-coder", "bailingmoe"]


def with_pre(gguf_bytes, name):
    """The GGUF file with tokenizer.ggml.pre set to `name` (vocabulary-only files: no tensor
    offsets to fix, only the string to splice)."""
    key = b"tokenizer.ggml.pre"
    at = gguf_bytes.find(len(key).to_bytes(8, "little") + key)
    assert at > 0, "tokenizer.ggml.pre not found"
    p = at + 8 + len(key)
    assert int.from_bytes(gguf_bytes[p:p + 4], "little") == 8  # string
    n = int.from_bytes(gguf_bytes[p + 4:p + 12], "little")
    value = name.encode()
    return gguf_bytes[:p + 4] + len(value).to_bytes(8, "little") + value + gguf_bytes[p + 12 + n:]


def build_pre_variants(vocab_path, out_path, count):
    """The same strings through llama.cpp with the GPT-2 vocabulary under each pre-tokenizer."""
    import tempfile
    from llama_cpp import Llama, __version__ as lcp_version
    strings = HAND_WRITTEN[:200] + generated(count, seed=99)
    # Keep the fixture small: long strings add little here.
    strings = [s for s in strings if len(s) <= 120]
    data = open(vocab_path, "rb").read()
    variants = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in PRE_VARIANTS:
            path = os.path.join(tmp, name + ".gguf")
            with open(path, "wb") as f:
                f.write(with_pre(data, name))
            llm = Llama(model_path=path, vocab_only=True, verbose=False)
            variants[name] = [llm.tokenize(s.encode(), add_bos=False, special=False) for s in strings]
            del llm
    fixture = {
        "vocab": os.path.basename(vocab_path),
        "vocab_sha256": sha256(vocab_path),
        "reference": "llama-cpp-python " + lcp_version,
        "strings": strings,
        "variants": variants,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{out_path}: {len(PRE_VARIANTS)} pre-tokenizers x {len(strings)} strings, "
          f"{os.path.getsize(out_path)} bytes")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="GGUF file (default: both default fixtures)")
    parser.add_argument("--out", help="JSON fixture to write")
    parser.add_argument("--count", type=int, default=1000, help="generated strings (default 1000)")
    args = parser.parse_args()
    if bool(args.model) != bool(args.out):
        parser.error("--model and --out go together")
    jobs = [(args.model, args.out)] if args.model else DEFAULT_JOBS
    for model, out in jobs:
        if not os.path.exists(model):
            sys.exit(f"golden_tokenizer.py: {model} is missing (run scripts/fetch_model.sh)")
        build(model, out, args.count)
    if not args.model:
        build_pre_variants(os.path.join(SHARED, "testdata", "tokenizer", "ggml-vocab-gpt-2.gguf"),
                           os.path.join(ROOT, "tests", "golden", "tokenizer", "pre_tokenizers.json"),
                           150)


if __name__ == "__main__":
    main()
