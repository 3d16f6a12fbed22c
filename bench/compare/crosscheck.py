#!/usr/bin/env python3
"""Cross-check of `tokamak bench serve` against an established client (NVIDIA's aiperf,
from PyPI) on one configuration and one running `tokamak serve`: the driver behind
bench/crosscheck.sh.

Both clients send the same shape of work (random prompts of --input-len tokens and
--output-len tokens each with EOS ignored, lengths spread by --range-ratio, greedy, streamed,
at most --concurrency in flight, --num-prompts requests, each client with its own seed).
The table gives medians and the difference aiperf vs tokamak for TTFT, TPOT and output
throughput; the check passes when every difference is within --tolerance.

Two ways to run them (--mode):
  together   (default) both clients at once against the one server, each with half of
             --concurrency, --repeats times: every request of either client shares the
             server's batches, its load and whatever else the machine runs, so a difference
             left between the two is a difference of measurement. Lengths are spread
             (--range-ratio 0.5 by default) so that completions, and with them the next
             arrivals of the two clients, interleave instead of marching in waves where one
             client's requests always reach the scheduler first. tokamak's client starts
             when the server has seen aiperf's first request (aiperf takes seconds to start).
  alternate  one client at a time, alternating, with the full --concurrency. Each client then
             also measures the load it puts on the machine itself: on this 2-vCPU machine any
             work on the second CPU slows the first by 40-60% (they behave as one core's two
             hardware threads), and aiperf is several Python processes that take ~30
             CPU-seconds per run of 32 requests against 0.2 for tokamak's client, so the
             server runs measurably slower under aiperf (its own TTFT and TPOT histograms
             show it) whatever the pinning.

Referee: tokamak serve's own TTFT and TPOT histograms (/metrics), read before and after
every run, give the server's view of the same requests; each client's figures are also
shown as a ratio to it (in together mode the server's view covers both clients' requests).
The server runs --threads kernel threads, pinned to the first CPUs, and the clients to the
others (taskset; --no-pin to turn off). The table shows the CPU each client and the server
used.

Definitions, as each tool documents them:
  TTFT    tokamak: first chunk with text - request sent (connection start).
          aiperf time_to_first_token: first response chunk with content - request sent.
  TPOT    tokamak: (E2E - TTFT) / (output tokens - 1).
          aiperf inter_token_latency: (request_latency - TTFT) / (output tokens - 1).
  tok/s   tokamak: output tokens / (first possible send -> last response end).
          aiperf output_token_throughput: output tokens / benchmark duration (first
          request sent -> last response received).
Token counts: both take the server's usage (aiperf with --use-server-token-count).
Lengths: tokamak draws input and output lengths uniformly from [L(1-R), L(1+R)]; aiperf
from a normal distribution with mean L and the same standard deviation, L*R/sqrt(3).
Prompts differ in content (tokamak: random token ids of the model's vocabulary, decoded;
aiperf: Shakespeare's sonnets cut to length with the model's tokenizer, exported from the
GGUF file).
"""
import argparse
import json
import os
import math
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
STEADY = [("ss_ttft_p50", "TTFT p50 (ms), after the first wave"),
          ("ss_ttft_mean", "TTFT mean (ms), after the first wave"),
          ("ss_tpot_p50", "TPOT p50 (ms), after the first wave"),
          ("ss_tpot_mean", "TPOT mean (ms), after the first wave"),
          ("ss_requests", "requests after the first wave")]
WHOLE_RUN = ("ttft_p50", "ttft_mean", "tpot_p50", "tpot_mean", "output_tok_s")
TOGETHER = ("ss_ttft_p50", "ss_ttft_mean", "ss_tpot_p50", "ss_tpot_mean", "output_tok_s")


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


class Child:
    """A client run as a child process, its output in a log file; finish() reaps it and
    returns the CPU seconds it and its descendants used (wait4's rusage)."""

    def __init__(self, argv, log_path):
        self.argv, self.log_path = argv, log_path
        self._log = open(log_path, "w")
        self._log.write("$ " + " ".join(argv) + "\n")
        self._log.flush()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)

    def finish(self):
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self._log.close()
        if self.proc.returncode != 0:
            with open(self.log_path) as f:
                raise RuntimeError(f"failed ({self.proc.returncode}): {' '.join(self.argv)}\n"
                                   f"{f.read()[-4000:]}")
        return usage.ru_utime + usage.ru_stime


def run(argv, log_path):
    return Child(argv, log_path).finish()


def client_prefix(a):
    """taskset prefix that keeps a client off the server's cores (unless --no-pin)."""
    return ["taskset", "-c", a.client_cpus] if a.client_cpus else []


def length_stddev(a, length):
    """aiperf's normal-distribution spread equal to tokamak's uniform one."""
    return length * a.range_ratio / math.sqrt(3)


def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default), for both clients alike."""
    v = sorted(values)
    pos = (len(v) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def steady_state(per_request, skip):
    """TTFT and TPOT p50 and mean over a client's requests in send order, less the first
    `skip`: with both clients at once, each one's first wave is a burst that reaches the
    scheduler before or after the other's depending on the clients' start-up, not on what
    they measure."""
    kept = per_request[skip:]
    ttft = [t for t, _ in kept]
    tpot = [p for _, p in kept]
    return {"ss_ttft_p50": percentile(ttft, 50), "ss_ttft_mean": statistics.fmean(ttft),
            "ss_tpot_p50": percentile(tpot, 50), "ss_tpot_mean": statistics.fmean(tpot),
            "ss_requests": len(kept)}


class TokamakClient:
    name = "tokamak"

    def __init__(self, a, url, seed, concurrency, rep):
        self.skip = concurrency if a.mode == "together" else 0
        self.path = os.path.join(a.out, f"tokamak-r{rep}.json")
        self.child = Child(
            [*client_prefix(a), a.tokamak, "bench", "serve", "--tokenizer-model", a.model,
             "--url", url, "--endpoint", "completions", "--model", MODEL_NAME,
             "--dataset", "random", "--input-len", str(a.input_len),
             "--output-len", str(a.output_len), "--range-ratio", str(a.range_ratio),
             "--num-prompts", str(a.num_prompts), "--max-concurrency", str(concurrency),
             "--seed", str(seed), "--json", self.path, "--label", "tokamak bench serve"],
            self.path + ".log")

    def result(self):
        cpu = self.child.finish()
        with open(self.path) as f:
            r = json.load(f)["runs"][0]
        if r["failed"]:
            raise RuntimeError(f"{self.path}: {r['failed']} requests failed")
        q = r["requests"]
        order = sorted(range(len(q["start_ms"])), key=lambda i: q["start_ms"][i])
        per_request = [(q["ttft_ms"][i], q["tpot_ms"][i]) for i in order if q["ok"][i]]
        return {"ttft_p50": r["ttft_ms"]["p50"], "ttft_mean": r["ttft_ms"]["mean"],
                "tpot_p50": r["tpot_ms"]["p50"], "tpot_mean": r["tpot_ms"]["mean"],
                **steady_state(per_request, self.skip),
                "output_tok_s": r["output_tokens_per_s"], "req_s": r["requests_per_s"],
                "prompt_tokens": r["prompt_tokens"] / r["completed"],
                "output_tokens": r["output_tokens"] / r["completed"], "client_cpu_s": cpu}


class AiperfClient:
    name = "aiperf"

    def __init__(self, a, url, seed, concurrency, rep):
        self.skip = concurrency if a.mode == "together" else 0
        self.art = os.path.join(a.out, f"aiperf-r{rep}")
        # Not HF_HUB_OFFLINE: aiperf 0.13 then looks a local tokenizer directory up in the
        # hub's cache and fails; given an absolute path, it loads it without the network.
        self.child = Child(
            [*client_prefix(a), a.aiperf, "profile", "--model", MODEL_NAME, "--url", url,
             "--endpoint-type", "completions", "--streaming", "--tokenizer", a.tokenizer,
             "--synthetic-input-tokens-mean", str(a.input_len),
             "--synthetic-input-tokens-stddev", f"{length_stddev(a, a.input_len):.3f}",
             "--output-tokens-mean", str(a.output_len),
             "--output-tokens-stddev", f"{length_stddev(a, a.output_len):.3f}",
             "--use-legacy-max-tokens", "--use-server-token-count",
             "--extra-inputs", "ignore_eos:true", "--extra-inputs", "temperature:0",
             "--concurrency", str(concurrency), "--request-count", str(a.num_prompts),
             "--random-seed", str(seed), "--output-artifact-dir", self.art,
             "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry",
             "--workers-max", str(a.aiperf_workers), "--record-processors", "1"],
            self.art + ".log")

    def result(self):
        cpu = self.child.finish()
        with open(os.path.join(self.art, "profile_export_aiperf.json")) as f:
            d = json.load(f)
        with open(os.path.join(self.art, "profile_export.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
        records.sort(key=lambda rec: rec["metadata"]["request_start_ns"])
        per_request = [(rec["metrics"]["time_to_first_token"]["value"],
                        rec["metrics"]["inter_token_latency"]["value"])
                       for rec in records if "inter_token_latency" in rec["metrics"]]

        def m(key, stat):
            v = d[key]
            return v[stat] if isinstance(v, dict) else v
        return {"ttft_p50": m("time_to_first_token", "p50"),
                "ttft_mean": m("time_to_first_token", "avg"),
                "tpot_p50": m("inter_token_latency", "p50"),
                "tpot_mean": m("inter_token_latency", "avg"),
                **steady_state(per_request, self.skip),
                "output_tok_s": m("output_token_throughput", "avg"),
                "req_s": m("request_throughput", "avg"),
                "prompt_tokens": m("input_sequence_length", "avg"),
                "output_tokens": m("output_sequence_length", "avg"), "client_cpu_s": cpu}


def requests_in_server(url):
    """Running plus waiting requests, from tokamak serve's /metrics gauges."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(("tokamak:num_requests_running", "tokamak:num_requests_waiting")):
            total += float(line.rsplit(" ", 1)[1])
    return total


def run_together(a, srv, seed, rep):
    """Both clients at once, each with half the concurrency; tokamak's starts when aiperf's
    first request reaches the server. Returns {client: figures}; the server's view and CPU
    cover both clients' requests."""
    half = max(1, a.concurrency // 2)
    cpu0, hist0 = srv.cpu_seconds(), server_histograms(srv.url)
    aiperf = AiperfClient(a, srv.url, seed, half, rep)
    deadline = time.monotonic() + 300
    while requests_in_server(srv.url) == 0:
        if aiperf.child.proc.poll() is not None or time.monotonic() > deadline:
            aiperf.result()  # raises with aiperf's log when it failed
            raise RuntimeError("aiperf sent no request")
        time.sleep(0.02)
    tokamak = TokamakClient(a, srv.url, seed + 1000, half, rep)
    figs = {"tokamak": tokamak.result(), "aiperf": aiperf.result()}
    server = server_means(hist0, server_histograms(srv.url))
    server["server_cpu_s"] = srv.cpu_seconds() - cpu0
    for fig in figs.values():
        fig.update(server)
    return figs


def run_alternate(a, srv, seed, rep):
    """One client after the other, each with the full concurrency, the order flipped every
    repeat. Returns {client: figures}, each with the server's view of its own requests."""
    order = [TokamakClient, AiperfClient]
    if rep % 2:
        order.reverse()
    figs = {}
    for client in order:
        cpu0, hist0 = srv.cpu_seconds(), server_histograms(srv.url)
        fig = client(a, srv.url, seed, a.concurrency, rep).result()
        fig["server_cpu_s"] = srv.cpu_seconds() - cpu0
        fig.update(server_means(hist0, server_histograms(srv.url)))
        figs[client.name] = fig
    return figs


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
    ap.add_argument("--num-prompts", type=int, default=32,
                    help="requests per client and run")
    ap.add_argument("--range-ratio", type=float, default=0.5,
                    help="length spread (tokamak bench serve's --range-ratio)")
    ap.add_argument("--mode", choices=("together", "alternate"), default="together")
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
            runner = run_together if a.mode == "together" else run_alternate
            for name, fig in runner(a, srv, 100 + rep, rep).items():
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

    how = (f"both clients at once, concurrency {a.concurrency // 2} each"
           if a.mode == "together" else
           f"one client at a time, alternating, concurrency {a.concurrency}")
    lines = [f"Cross-check on {os.path.basename(a.model)}: random {a.input_len}/{a.output_len} "
             f"(range ratio {a.range_ratio}), {how}, {a.num_prompts} requests per client and "
             f"run, {a.repeats} runs (median, min-max); server {a.threads} thread(s)", "",
             "| metric | tokamak bench serve | aiperf | aiperf / tokamak - 1 |",
             "|---|---|---|---|"]
    checked = TOGETHER if a.mode == "together" else WHOLE_RUN
    rows = (STEADY + METRICS) if a.mode == "together" else METRICS
    ok = True
    for key, label in rows + [("prompt_tokens", "prompt tokens / request"),
                                 ("output_tokens", "output tokens / request")]:
        t, p = med("tokamak", key), med("aiperf", key)
        diff = p / t - 1 if t else float("nan")
        flag = ""
        if key in checked:
            within = abs(diff) <= a.tolerance
            ok = ok and within
            flag = " ok" if within else " **over**"
        lines.append(f"| {label} | {spread('tokamak', key)} | {spread('aiperf', key)} | "
                     f"{diff * 100:+.1f}%{flag} |")
    what = ("TTFT and TPOT after each client's first wave, and output tok/s"
            if a.mode == "together" else "TTFT, TPOT and output tok/s")
    lines += ["", f"{'PASS' if ok else 'FAIL'}: {what} {'all' if ok else 'not all'} within "
              f"{a.tolerance * 100:.0f}% (the rows marked ok or over)",
              "", "\"server's own\" figures come from tokamak serve's /metrics histograms over "
              "the requests of each client's runs (with both clients at once: of both clients' "
              "requests; engine-side: from submit, no HTTP); the "
              "client / server ratios tell whether a client measures what the server did, "
              "whatever load that client put on the machine."]
    text = "\n".join(lines)
    with open(os.path.join(a.out, "crosscheck.md"), "w") as f:
        f.write(text + "\n")
    print("\n" + text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
