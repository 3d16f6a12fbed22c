#!/usr/bin/env python3
"""Batch-1 prefill and decode speed: `tokamak run` beside llama.cpp on the same GGUF file.

A stop-gap until `tokamak bench` and bench/compare.sh exist (see the benchmark issue). Needs
the PyPI package llama-cpp-python (built with native CPU flags by pip). Runs alternate
A/B, REPEATS times each, and prints medians and the tokamak/llama.cpp ratio.

    python3 bench/batch1_vs_llamacpp.py [MODEL] [--threads 2] [--prompt-tokens 128] [--gen 128]
"""
import argparse
import re
import statistics
import subprocess
import time

from llama_cpp import Llama

TIMING = re.compile(r"prompt (\d+) tok .*prefill ([\d.]+) tok/s \| decode ([\d.]+) tok/s")


def tokamak_run(binary, model, prompt, threads, gen):
    out = subprocess.run(
        [binary, "run", "-m", model, "-p", prompt, "-n", str(gen), "--temp", "0",
         "--ignore-eos", "-t", str(threads)], capture_output=True, text=True, check=True)
    m = TIMING.search(out.stderr)
    return int(m.group(1)), float(m.group(2)), float(m.group(3))


def llamacpp_run(llm, prompt, gen):
    ids = llm.tokenize(prompt.encode(), add_bos=False, special=False)
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    t1 = time.perf_counter()
    # Decode speed does not depend on which token is fed: feed the last prompt token again
    # (tokamak's side samples greedily; sampling is a small part of a step at this size).
    for _ in range(gen - 1):
        llm.eval([ids[-1]])
    t2 = time.perf_counter()
    return len(ids), len(ids) / (t1 - t0), (gen - 1) / (t2 - t1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--binary", default="build/tokamak")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    llm = Llama(model_path=args.model, n_ctx=1024, n_batch=512, n_threads=args.threads,
                verbose=False)
    words = "the river wound through the valley past fields of wheat and small stone houses "
    prompt = ""
    while len(llm.tokenize(prompt.encode(), add_bos=False)) < args.prompt_tokens:
        prompt += words.split()[len(prompt.split()) % 14] + " "

    rows = {"tokamak": [], "llama.cpp": []}
    for _ in range(args.repeats):
        rows["tokamak"].append(tokamak_run(args.binary, args.model, prompt, args.threads, args.gen))
        rows["llama.cpp"].append(llamacpp_run(llm, prompt, args.gen))

    med = {k: (statistics.median(r[1] for r in v), statistics.median(r[2] for r in v),
               min(r[2] for r in v), max(r[2] for r in v)) for k, v in rows.items()}
    n_prompt = rows["tokamak"][0][0]
    print(f"model {args.model}, {args.threads} threads, prompt {n_prompt} tokens, "
          f"{args.gen} generated, {args.repeats} alternating runs each (median; decode range)")
    print(f"{'':10} {'prefill tok/s':>14} {'decode tok/s':>13} {'decode range':>16}")
    for k, (p, d, lo, hi) in med.items():
        print(f"{k:10} {p:14.1f} {d:13.1f} {lo:8.1f}-{hi:<7.1f}")
    print(f"{'ratio':10} {med['tokamak'][0] / med['llama.cpp'][0]:14.2f} "
          f"{med['tokamak'][1] / med['llama.cpp'][1]:13.2f}")


if __name__ == "__main__":
    main()
