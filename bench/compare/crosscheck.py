#!/usr/bin/env python3
"""Cross-check of `tokamak bench serve` against an established client (NVIDIA's aiperf,
from PyPI) on one configuration and one running `tokamak serve`: the driver behind
bench/crosscheck.sh.

Both clients send the same shape of work (random prompts of --input-len tokens,
--output-len tokens each with EOS ignored, greedy, streamed, at most --concurrency in
flight, --num-prompts requests); runs alternate between the clients --repeats times, each
with its own seed. The table gives medians and the difference aiperf vs tokamak for TTFT,
TPOT and output throughput; the check passes when every difference is within --tolerance.

Referee: tokamak serve's own TTFT and TPOT histograms (/metrics), read before and after
every client run, give the server's view of the same requests; each client's figures are
also shown as a ratio to it. The server runs 1 kernel thread, pinned to CPU 0, and the
clients to the other CPUs (taskset; --no-pin to turn off): aiperf is several Python
processes and takes ~30 CPU-seconds per run of 32 requests, which unpinned on 2 cores slows
the very server it measures (seen: its runs' server-side TPOT 20% higher). The table shows
the CPU each client and the server used.

Definitions, as each tool documents them:
  TTFT    tokamak: first chunk with text - request sent (connection start).
          aiperf time_to_first_token: first response chunk with content - request sent.
  TPOT    tokamak: (E2E - TTFT) / (output tokens - 1).
          aiperf inter_token_latency: (request_latency - TTFT) / (output tokens - 1).
  tok/s   tokamak: output tokens / (first possible send -> last response end).
          aiperf output_token_throughput: output tokens / benchmark duration (first
          request sent -> last response received).
Token counts: both take the server's usage (aiperf with --use-server-token-count).
Prompts differ in content (tokamak: random token ids of the model's vocabulary, decoded;
aiperf: Shakespeare's sonnets cut to length with the model's tokenizer, exported from the
GGUF file) but not in length.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

MODEL_NAME = "bench-model"
METRICS = [("ttft_p50", "TTFT p50 (ms)"), ("ttft_mean", "TTFT mean (ms)"),
           ("tpot_p50", "TPOT p50 (ms)"), ("tpot_mean", "TPOT mean (ms)"),
           ("output_tok_s", "output tok/s"), ("req_s", "requests/s"),
           ("server_ttft_mean", "server's own TTFT mean (ms)"),
           ("server_tpot_mean", "server's own TPOT mean (ms)"),
           ("ttft_vs_server", "client TTFT mean / server's"),
           ("tpot_vs_server", "client TPOT mean / server's"),
           ("client_cpu_s", "client CPU, whole command (s)"),
           ("server_cpu_s", "server CPU during the command (s)")]
CHECKED = ("ttft_p50", "ttft_mean", "tpot_p50", "tpot_mean", "output_tok_s")


def log(msg):
    print(f"[crosscheck {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def server_histograms(url):
    """Sums and counts of tokamak serve's own latency histograms (GET /metrics)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        name = name.split("{", 1)[0]
        if name.endswith("_sum") or name.endswith("_count"):
            out[name] = float(value)
    return out


def server_means(before, after):
    """The server's mean TTFT and TPOT (ms) over the requests between two snapshots."""
    def mean(metric):
        n = after[f"tokamak:{metric}_count"] - before[f"tokamak:{metric}_count"]
        total = after[f"tokamak:{metric}_sum"] - before[f"tokamak:{metric}_sum"]
        return 1000 * total / n if n else float("nan")
    return {"server_ttft_mean": mean("time_to_first_token_seconds"),
            "server_tpot_mean": mean("request_time_per_output_token_seconds")}


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(argv, log_path, env=None):
    with open(log_path, "w") as f:
        f.write("$ " + " ".join(argv) + "\n")
        f.flush()
        c0 = children_cpu()
        r = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           env=env)
        cpu = children_cpu() - c0
    if r.returncode != 0:
        with open(log_path) as f:
            raise RuntimeError(f"failed ({r.returncode}): {' '.join(argv)}\n{f.read()[-4000:]}")
    return cpu


def client_prefix(a):
    """taskset prefix that keeps a client off the server's core (with --pin)."""
    return ["taskset", "-c", a.client_cpus] if a.client_cpus else []


def tokamak_client(a, url, seed, out_dir, rep):
    path = os.path.join(out_dir, f"tokamak-r{rep}.json")
    cpu = run([*client_prefix(a), a.tokamak, "bench", "serve", "--tokenizer-model", a.model, "--url", url,
               "--endpoint", "completions", "--model", MODEL_NAME, "--dataset", "random",
               "--input-len", str(a.input_len), "--output-len", str(a.output_len),
               "--num-prompts", str(a.num_prompts), "--max-concurrency", str(a.concurrency),
               "--seed", str(seed), "--json", path, "--label", "tokamak bench serve"],
              path + ".log")
    with open(path) as f:
        r = json.load(f)["runs"][0]
    if r["failed"]:
        raise RuntimeError(f"{path}: {r['failed']} requests failed")
    return {"ttft_p50": r["ttft_ms"]["p50"], "ttft_mean": r["ttft_ms"]["mean"],
            "tpot_p50": r["tpot_ms"]["p50"], "tpot_mean": r["tpot_ms"]["mean"],
            "output_tok_s": r["output_tokens_per_s"], "req_s": r["requests_per_s"],
            "prompt_tokens": r["prompt_tokens"] / r["completed"],
            "output_tokens": r["output_tokens"] / r["completed"], "client_cpu_s": cpu}


def aiperf_client(a, url, seed, out_dir, rep):
    art = os.path.join(out_dir, f"aiperf-r{rep}")
    argv = [*client_prefix(a), a.aiperf, "profile", "--model", MODEL_NAME, "--url", url,
            "--endpoint-type", "completions", "--streaming", "--tokenizer", a.tokenizer,
            "--synthetic-input-tokens-mean", str(a.input_len),
            "--synthetic-input-tokens-stddev", "0",
            "--output-tokens-mean", str(a.output_len), "--output-tokens-stddev", "0",
            "--use-legacy-max-tokens", "--use-server-token-count",
            "--extra-inputs", "ignore_eos:true", "--extra-inputs", "temperature:0",
            "--concurrency", str(a.concurrency), "--request-count", str(a.num_prompts),
            "--random-seed", str(seed), "--output-artifact-dir", art, "--ui-type", "none",
            "--no-server-metrics", "--no-gpu-telemetry", "--workers-max", str(a.aiperf_workers),
            "--record-processors", "1"]
    # Not HF_HUB_OFFLINE: aiperf 0.13 then looks a local tokenizer directory up in the hub's
    # cache and fails; given an absolute path, it loads the directory without the network.
    cpu = run(argv, art + ".log")
    with open(os.path.join(art, "profile_export_aiperf.json")) as f:
        d = json.load(f)

    def m(key, stat):
        v = d[key]
        return v[stat] if isinstance(v, dict) else v
    return {"ttft_p50": m("time_to_first_token", "p50"),
            "ttft_mean": m("time_to_first_token", "avg"),
            "tpot_p50": m("inter_token_latency", "p50"),
            "tpot_mean": m("inter_token_latency", "avg"),
            "output_tok_s": m("output_token_throughput", "avg"),
            "req_s": m("request_throughput", "avg"),
            "prompt_tokens": m("input_sequence_length", "avg"),
            "output_tokens": m("output_sequence_length", "avg"), "client_cpu_s": cpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokamak", required=True)
    ap.add_argument("--aiperf", required=True)
    ap.add_argument("--tokenizer", required=True, help="HF tokenizer directory for aiperf")
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=1,
                    help="server kernel threads (default 1: on 2 cores, a core for the client)")
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--aiperf-workers", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--no-pin", action="store_true",
                    help="do not pin the server to CPU 0 and the clients to the other CPUs")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    ncpu = os.cpu_count() or 1
    pin = not a.no_pin and ncpu >= 2 and a.threads < ncpu and shutil.which("taskset")
    server_cpus = ",".join(str(i) for i in range(a.threads)) if pin else ""
    a.client_cpus = ",".join(str(i) for i in range(a.threads, ncpu)) if pin else ""
    if pin:
        log(f"server pinned to CPU {server_cpus}, clients to CPU {a.client_cpus}")

    srv = servers.tokamak_server(a.tokamak, a.model, a.threads, max(a.concurrency, 8),
                                 max(2048, a.input_len + a.output_len + 64), MODEL_NAME,
                                 os.path.join(a.out, "tokamak-serve.log"))
    if server_cpus:
        srv.argv = ["taskset", "-c", server_cpus, *srv.argv]
    results = {"tokamak": [], "aiperf": []}
    try:
        srv.start()
        log(f"tokamak serve healthy at {srv.url}")
        # Warm-up, unmeasured.
        run([a.tokamak, "bench", "serve", "--tokenizer-model", a.model, "--url", srv.url,
             "--model", MODEL_NAME, "--input-len", "64", "--output-len", "16", "--num-prompts",
             "4", "--max-concurrency", "2", "--seed", "999"], os.path.join(a.out, "warmup.log"))
        for rep in range(a.repeats):
            order = [("tokamak", tokamak_client), ("aiperf", aiperf_client)]
            if rep % 2:
                order.reverse()
            for name, fn in order:
                cpu0, hist0 = srv.cpu_seconds(), server_histograms(srv.url)
                fig = fn(a, srv.url, 100 + rep, a.out, rep)
                fig["server_cpu_s"] = srv.cpu_seconds() - cpu0
                fig.update(server_means(hist0, server_histograms(srv.url)))
                fig["ttft_vs_server"] = fig["ttft_mean"] / fig["server_ttft_mean"]
                fig["tpot_vs_server"] = fig["tpot_mean"] / fig["server_tpot_mean"]
                results[name].append(fig)
                log(f"r{rep} {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in fig.items()))
    finally:
        srv.stop()

    with open(os.path.join(a.out, "crosscheck.json"), "w") as f:
        json.dump({"config": vars(a), "results": results}, f, indent=1)

    def med(name, key):
        return statistics.median(r[key] for r in results[name])

    def spread(name, key):
        v = [r[key] for r in results[name]]
        f = "{:.3f}" if key.endswith("_vs_server") else "{:.1f}"
        return (f.format(statistics.median(v)) + " (" + f.format(min(v)) + "-"
                + f.format(max(v)) + ")")

    lines = [f"Cross-check on {os.path.basename(a.model)}: random {a.input_len}/{a.output_len}, "
             f"concurrency {a.concurrency}, {a.num_prompts} requests, {a.repeats} alternating "
             f"runs each (median, min-max)", "",
             "| metric | tokamak bench serve | aiperf | aiperf / tokamak - 1 |",
             "|---|---|---|---|"]
    ok = True
    for key, label in METRICS + [("prompt_tokens", "prompt tokens / request"),
                                 ("output_tokens", "output tokens / request")]:
        t, p = med("tokamak", key), med("aiperf", key)
        diff = p / t - 1 if t else float("nan")
        flag = ""
        if key in CHECKED:
            within = abs(diff) <= a.tolerance
            ok = ok and within
            flag = " ok" if within else " **over**"
        lines.append(f"| {label} | {spread('tokamak', key)} | {spread('aiperf', key)} | "
                     f"{diff * 100:+.1f}%{flag} |")
    lines += ["", f"{'PASS' if ok else 'FAIL'}: TTFT, TPOT and output tok/s "
              f"{'all' if ok else 'not all'} within {a.tolerance * 100:.0f}%",
              "", "\"server's own\" figures come from tokamak serve's /metrics histograms over "
              "the requests of each client's runs (engine-side: from submit, no HTTP); the "
              "client / server ratios tell whether a client measures what the server did, "
              "whatever load that client put on the machine."]
    text = "\n".join(lines)
    with open(os.path.join(a.out, "crosscheck.md"), "w") as f:
        f.write(text + "\n")
    print("\n" + text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
