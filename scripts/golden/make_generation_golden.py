#!/usr/bin/env python3
"""Writes golden greedy continuations from llama.cpp (the reference) for tokamak's tests.

Run by hand, not in CI (it needs the PyPI package llama-cpp-python, which builds llama.cpp):
    pip install llama-cpp-python jinja2
    python3 scripts/golden/make_generation_golden.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
        tests/golden/generation/smollm2-q4_1.json

For every prompt it records the prompt's token ids (llama.cpp's tokenizer), the greedy
continuation (up to 32 tokens, ending early at an end-of-generation token) and the top-5
logits of the first 4 steps, twice: through llama.cpp's prompt-processing arithmetic
("greedy", "top5"; see greedy_continuation) and through its one-token decode path
("greedy_decode_path", "top5_decode_path"). tests/model/golden_generation_test.cpp replays the same token ids
through tokamak and compares.
"""
import hashlib
import json
import sys

import jinja2
import numpy as np
import llama_cpp
from llama_cpp import Llama, __version__ as llama_cpp_version

N_STEPS = 32
N_TOP_STEPS = 4
TOP_K = 5

ENGLISH = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "The three laws of thermodynamics are",
    "Here is a list of the planets in our solar system:",
    "Q: What is 12 times 12?\nA:",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "In 1969, Neil Armstrong",
    "Photosynthesis is the process by which",
]
CODE = [
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "#include <stdio.h>\n\nint main(void) {\n",
    "SELECT name, COUNT(*) FROM orders GROUP BY",
    "function debounce(fn, ms) {\n  let timer;\n  return (...args) => {",
]
OTHER = [
    "中国的首都是",
    "我喜欢吃苹果，因为",
    "Emoji test: 😀🚀🎉 means",
    "Les mots français avec accents: é, è, à, ç, et",
    "    \t  whitespace   runs\n\n\n and 1234567890 digits 3.14159",
]
CHAT = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are a concise assistant."},
     {"role": "user", "content": "Name three primary colors."}],
    [{"role": "user", "content": "Hi!"},
     {"role": "assistant", "content": "Hello! How can I help you today?"},
     {"role": "user", "content": "Tell me a fun fact about octopuses."}],
    [{"role": "user", "content": "Write a haiku about the sea."}],
]


def long_prompt():
    # About 1,000 tokens of plain English, deterministic.
    sentences = [
        "The river wound through the valley, past fields of wheat and small stone houses.",
        "Every morning the baker opened his shop before the sun rose over the hills.",
        "Children ran along the path to school, laughing and calling to one another.",
        "In the evening the old men sat by the fountain and talked about the weather.",
        "The library kept books from every century, and the librarian knew them all.",
    ]
    text = []
    for i in range(66):
        text.append(sentences[i % len(sentences)])
    return " ".join(text) + " The next morning,"


def render_chat(template_src, messages, bos, eos):
    # The environment Hugging Face transformers uses for chat templates.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(template_src).render(
        messages=messages, add_generation_prompt=True, bos_token=bos, eos_token=eos)


def last_logits(llm, n_vocab):
    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float32)


def greedy_continuation(llm, ids, n_vocab, vocab, batched):
    """Greedy decode of up to N_STEPS tokens with the top-5 logits of the first steps.

    llama.cpp computes a batch of one token (its decode path) with other matmul kernels than
    a batch of two or more (tinyBLAS, "only enable sgemm for prompt processing"), so its
    decode and prefill disagree in the last bits. batched=True evaluates every step as a
    two-token batch (the previous token again plus the new one), which is the arithmetic of
    llama.cpp's prompt processing; batched=False is its ordinary one-token decode.
    """
    llm.reset()
    llm.eval(ids)
    greedy, top = [], []
    for step in range(N_STEPS):
        logits = last_logits(llm, n_vocab)
        best = int(np.argmax(logits))
        if step < N_TOP_STEPS:
            order = np.argsort(-logits, kind="stable")[:TOP_K]
            top.append([[int(j), float(logits[j])] for j in order])
        greedy.append(best)
        if llama_cpp.llama_vocab_is_eog(vocab, best):
            break
        if batched:
            prev = int(llm._input_ids[llm.n_tokens - 1])
            llm.n_tokens -= 1
            llm.eval([prev, best])
        else:
            llm.eval([best])
    return greedy, top


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    model_path, out_path = sys.argv[1], sys.argv[2]
    llm = Llama(model_path=model_path, n_ctx=2048, n_batch=512, n_threads=2, seed=0,
                verbose=False, logits_all=False)
    meta = llm.metadata
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    n_vocab = llm.n_vocab()
    add_bos = meta.get("tokenizer.ggml.add_bos_token", "true") == "true"
    template = meta.get("tokenizer.chat_template")
    tokens_text = lambda i: llm.detokenize([i], special=True).decode("utf-8", "replace")
    bos = tokens_text(llm.token_bos())
    eos = tokens_text(llm.token_eos())

    prompts = []
    for i, t in enumerate(ENGLISH):
        prompts.append(("english-%d" % i, t, False))
    for i, t in enumerate(CODE):
        prompts.append(("code-%d" % i, t, False))
    for i, t in enumerate(OTHER):
        prompts.append(("other-%d" % i, t, False))
    prompts.append(("long-1000", long_prompt(), False))
    if template:
        for i, msgs in enumerate(CHAT):
            prompts.append(("chat-%d" % i, render_chat(template, msgs, bos, eos), True))

    records = []
    for name, text, parse_special in prompts:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=parse_special)
        greedy_b, top_b = greedy_continuation(llm, ids, n_vocab, vocab, batched=True)
        greedy_d, top_d = greedy_continuation(llm, ids, n_vocab, vocab, batched=False)
        records.append({"name": name, "text": text, "parse_special": parse_special,
                        "prompt_ids": list(map(int, ids)),
                        "greedy": greedy_b, "top5": top_b,
                        "greedy_decode_path": greedy_d, "top5_decode_path": top_d})
        same = len(greedy_b) == len(greedy_d) and greedy_b == greedy_d
        print(f"{name}: llama.cpp decode path {'==' if same else '!='} its batched path",
              file=sys.stderr)

    out = {
        "generator": "scripts/golden/make_generation_golden.py",
        "reference": f"llama.cpp via llama-cpp-python {llama_cpp_version}",
        "model_file": model_path.split("/")[-1],
        "model_sha256": sha256(model_path),
        "n_steps": N_STEPS,
        "prompts": records,
    }
    with open(out_path, "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
