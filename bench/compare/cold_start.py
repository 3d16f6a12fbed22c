#!/usr/bin/env python3
"""Cold start, tokamak beside llama.cpp: the wall time from starting the server process to
the first generated token, on one GGUF file, same threads, same context.

For each engine and repeat (alternating, the order flipped every repeat):
  1. with --cache cold, the model file's pages are dropped from the page cache first
     (posix_fadvise DONTNEED: no root needed; `fincore` confirms 0 resident pages), so the
     start reads the file from the disk; with --cache warm they stay resident from the
     previous start;
  2. the server is spawned; GET /health is polled every 5 ms until it answers 200 (ready);
  3. one completion of a single greedy token is requested (POST /v1/completions, a short
     prompt); the answer carries the first token. Its arrival, counted from the spawn, is
     the cold start.
Both servers get one slot with the same context (`servers.py`), so neither sizes a large KV
cache the other does not. Prints a table of medians (min-max) and writes JSON with every run.

  python3 bench/compare/cold_start.py --tokamak build/tokamak \\
      --llama-server third_party_peers/llama.cpp-build-0.3.36/bin/llama-server \\
      --model models/SmolLM2-135M-Instruct.Q4_1.gguf --threads 2 --repeats 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

MODEL_NAME = "bench-model"
PROMPT = "The capital of France is"


def drop_from_page_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_bytes(path):
    """Bytes of the file in the page cache (fincore), or None when it cannot tell."""
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                             capture_output=True, text=True, check=True).stdout.split()
        return int(out[0])
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None


def first_token(server):
    body = json.dumps({"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 1,
                       "temperature": 0}).encode()
    req = urllib.request.Request(server.url + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        answer = json.load(r)
    text = answer["choices"][0]["text"]
    return time.monotonic(), text


def one_start(engine, a, cache, out_dir, run):
    if cache == "cold":
        drop_from_page_cache(a.model)
    resident = resident_bytes(a.model)
    log_path = os.path.join(out_dir, f"{engine}_{cache}_{run}.log")
    if engine == "tokamak":
        server = servers.tokamak_server(a.tokamak, a.model, a.threads, 1, a.ctx, MODEL_NAME,
                                        log_path)
    else:
        env = dict(os.environ)
        env["GOMP_SPINCOUNT"] = "10000"  # as bench/compare.sh runs it (run_compare.py)
        server = servers.llama_server(a.llama_server, a.model, a.threads, 1, a.ctx, MODEL_NAME,
                                      log_path, env=env)
    try:
        server.start(timeout_s=300, poll_s=0.005)
        done, text = first_token(server)
    finally:
        server.stop()
    t0, ready = server.started_at, server.ready_at
    return {"engine": engine, "cache": cache, "run": run, "resident_before": resident,
            "ready_s": ready - t0, "first_token_s": done - t0, "text": text}


def median_range(values):
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokamak", required=True)
    p.add_argument("--llama-server", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=2048, help="context of the one slot")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cache", choices=["cold", "warm", "both"], default="both")
    p.add_argument("--out", default="/tmp/tokamak_cold_start")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    caches = ["cold", "warm"] if a.cache == "both" else [a.cache]
    runs = []
    for run in range(a.repeats):
        order = ["tokamak", "llama.cpp"] if run % 2 == 0 else ["llama.cpp", "tokamak"]
        for cache in caches:
            for engine in order:
                r = one_start(engine, a, cache, a.out, run)
                print(f"[cold_start] run {run} {cache:4s} {engine:9s} ready {r['ready_s']:.3f} s,"
                      f" first token {r['first_token_s']:.3f} s (resident before: "
                      f"{r['resident_before']} B)", flush=True)
                runs.append(r)
    with open(os.path.join(a.out, "cold_start.json"), "w") as f:
        json.dump({"model": a.model, "threads": a.threads, "ctx": a.ctx, "runs": runs}, f,
                  indent=1)
    print(f"\nmodel {a.model}, {a.threads} threads, median (min-max) of {a.repeats}, seconds\n")
    print("| page cache | metric | tokamak | llama.cpp | tokamak / llama.cpp |")
    print("|---|---|---|---|---|")
    for cache in caches:
        for key, name in (("ready_s", "start to ready (/health 200)"),
                          ("first_token_s", "start to first token")):
            t = [r[key] for r in runs if r["engine"] == "tokamak" and r["cache"] == cache]
            l = [r[key] for r in runs if r["engine"] == "llama.cpp" and r["cache"] == cache]
            print(f"| {cache} | {name} | {median_range(t)} | {median_range(l)} | "
                  f"{statistics.median(t) / statistics.median(l):.2f} |")


if __name__ == "__main__":
    main()
