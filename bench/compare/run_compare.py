#!/usr/bin/env python3
"""tokamak beside llama.cpp on one GGUF file: the driver behind bench/compare.sh.

Offline: batch-1 prefill of a 512-token prompt and decode of 128 tokens after it, from
`llama-bench` (pp512 at depth 0, tg128 at depth 512) and `tokamak bench throughput`
(concurrency 1: prompt tokens / TTFT p50, and 1000 / TPOT p50).

Serving: both servers run side by side (one idle while the other is measured) with the same
threads, parallel slots = the largest concurrency, the same context per sequence and the
same KV capacity; the same client (`tokamak bench serve`) sends identical workloads to
each: batch-1 latency, a concurrency sweep and the prefix-shared workload. Every run uses
its own seed (the same for both servers), so no prompt is ever seen twice by a server's
prompt cache except where the workload shares a prefix on purpose.

Runs alternate A/B (the order flips every repeat) and the tables give medians, min-max and
the ratio tokamak / llama.cpp. After each offline repeat, `tokamak_ceilings` (next to the
tokamak binary, in bench/, or --ceilings) measures the read bandwidth, and the decode floor
account puts both engines' decode time beside the time to read a token's bytes at that
bandwidth (see decode_floors), and the prefill floor account puts both engines' prefill
beside the time its arithmetic takes at the measured int8 rates, and with attention at the
fp32 FMA rate (see prefill_floors).
Everything lands in --out: per-run JSON, server logs,
summary.md, samples.json and the HTML reports.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
import stats  # noqa: E402

MODEL_NAME = "bench-model"  # the name both servers answer to
LOG_FILE = None  # --out/compare.log once known


def log(msg):
    line = f"[compare {time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    if LOG_FILE:
        with open(LOG_FILE, "a") as f:
            f.write(line + "\n")


def llama_env(a):
    """llama.cpp's environment. Its CPU backend runs on OpenMP (libgomp), whose threads by
    default spin ~300,000 iterations at every barrier before sleeping. Measured here with
    llama-bench (2 threads, default model, pp128 / tg64 tok/s):
      as built, quiet machine          ~240-280 / ~120
      as built, other load on the cores    37 / 60 +- 82  (a descheduled thread stalls the
                                                           other, which keeps spinning)
      OMP_WAIT_POLICY=passive            ~300 / 41    (a futex wake-up at each of the
                                                       ~600 barriers of a token)
      GOMP_SPINCOUNT=10000               ~280-350 / ~120, also under load
    The last spins briefly and then sleeps, which is also what tokamak's own thread pool
    does (2,048 pause iterations, then a condition variable): the default here
    (--llama-omp brief-spin). --llama-omp default keeps libgomp's own setting (right on a
    dedicated, quiet machine), --llama-omp passive sets OMP_WAIT_POLICY=passive.
    A peer built with clang (bench/compare.sh does on AMX CPUs) runs on LLVM's libomp
    instead, which spins KMP_BLOCKTIME (200 ms by default) before sleeping: brief-spin
    sets it to 1 ms, its smallest non-zero setting in milliseconds."""
    env = dict(os.environ)
    if a.llama_omp == "brief-spin":
        env["GOMP_SPINCOUNT"] = "10000"
        env["KMP_BLOCKTIME"] = "1"
    elif a.llama_omp == "passive":
        env["OMP_WAIT_POLICY"] = "passive"
    return env


LLAMA_OMP_TEXT = {"brief-spin": "GOMP_SPINCOUNT=10000 (libomp: KMP_BLOCKTIME=1)", "passive": "OMP_WAIT_POLICY=passive",
                  "default": "libgomp's default waiting"}
LOADS = []  # every load average read, for the summary
PEER_BUILDS = []  # with --llama-bench-also: per offline repeat, the best build of each metric


def loadavg():
    with open("/proc/loadavg") as f:
        v = float(f.read().split()[0])
    LOADS.append(v)
    return v


def run_checked(argv, log_path):
    with open(log_path, "w") as f:
        f.write("$ " + " ".join(argv) + "\n")
        f.flush()
        r = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"command failed ({r.returncode}): {' '.join(argv)}\n{tail}")


# --- offline ------------------------------------------------------------------------------

def build_label(llama_bench):
    """A llama.cpp build's name: the folder that holds its bin/ (llama.cpp-build-0.3.36-avx512)."""
    return os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(llama_bench))))


def offline_llamacpp(a, out_dir, rep):
    """llama.cpp's offline figures: those of --llama-bench, or with --llama-bench-also the best
    of every build for each metric, each build's own under "builds" and the winner's name
    under "best_build"."""
    benches = [a.llama_bench] + a.llama_bench_also
    if len(benches) == 1:
        return offline_llamabench(a, a.llama_bench, out_dir, f"r{rep}")
    builds = {}
    for bench in benches:
        label = build_label(bench)
        builds[label] = offline_llamabench(a, bench, out_dir, f"{label}-r{rep}")
        log(f"offline r{rep} llama.cpp {label}: "
            + ", ".join(f"{k} {v:.1f}" for k, v in builds[label].items()))
    return best_of_builds(builds)


def best_of_builds(builds):
    """Per metric, the highest figure among the builds (all are tokens/s)."""
    fig = {"builds": builds, "best_build": {}}
    for label, b in builds.items():
        for metric, value in b.items():
            if value > fig.get(metric, float("-inf")):
                fig[metric] = value
                fig["best_build"][metric] = label
    return fig


def serving_build(a, best_builds):
    """The llama-server to serve with after the offline runs: that of the build whose decode
    won the most repeats (serving is decode-bound), the first build on a tie or where that
    build has no llama-server."""
    labels = [build_label(b) for b in [a.llama_bench] + a.llama_bench_also]
    wins = [sum(1 for b in best_builds if b.get("decode_tok_s") == label) for label in labels]
    best = max(range(len(labels)), key=lambda i: (wins[i], -i))
    server = os.path.join(os.path.dirname(([a.llama_bench] + a.llama_bench_also)[best]),
                          "llama-server")
    return server if best > 0 and os.access(server, os.X_OK) else a.llama_server


def peer_builds_text(a, best_builds):
    """Markdown: the llama.cpp builds run offline, per metric how many repeats each won, and
    the one serving (a.llama_server, which main set from serving_build)."""
    labels = [build_label(b) for b in [a.llama_bench] + a.llama_bench_also]
    wins = []
    for metric in sorted({m for b in best_builds for m in b}):
        counts = {label: sum(1 for b in best_builds if b.get(metric) == label) for label in labels}
        wins.append(f"{metric}: " + ", ".join(f"{label} {n}" for label, n in counts.items() if n))
    return (f"llama.cpp's figures are the best of {len(labels)} builds per metric and repeat ("
            + ", ".join(labels) + "). Repeats each build won: " + "; ".join(wins)
            + f". llama-server of {build_label(a.llama_server)} serves (the build whose decode"
            " won most, the first one on a tie).")


def offline_llamabench(a, llama_bench, out_dir, tag):
    path = os.path.join(out_dir, f"llama-bench-{tag}.json")
    argv = [llama_bench, "-m", a.model, "-t", str(a.threads), "-p", str(a.prefill_len),
            "-n", str(a.decode_len), "-d", f"0,{a.prefill_len}", "-r", "1", "-o", "json"]
    with open(path, "w") as f:
        r = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, text=True,
                           stdin=subprocess.DEVNULL, env=llama_env(a))
    if r.returncode != 0:
        raise RuntimeError(f"llama-bench failed: {r.stderr[-3000:]}")
    with open(path) as f:
        tests = json.load(f)
    fig = {}
    for t in tests:
        if t["n_prompt"] == a.prefill_len and t["n_gen"] == 0 and t["n_depth"] == 0:
            fig["prefill_tok_s"] = t["avg_ts"]
        if t["n_gen"] == a.decode_len and t["n_prompt"] == 0 and t["n_depth"] == a.prefill_len:
            fig["decode_tok_s"] = t["avg_ts"]
        if t["n_gen"] == a.decode_len and t["n_prompt"] == 0 and t["n_depth"] == 0:
            fig["decode_d0_tok_s"] = t["avg_ts"]
    return fig


def offline_tokamak(a, out_dir, rep):
    path = os.path.join(out_dir, f"tokamak-throughput-r{rep}.json")
    argv = [a.tokamak, "bench", "throughput", "-m", a.model, "-t", str(a.threads),
            "--num-prompts", str(a.offline_prompts), "--input-len", str(a.prefill_len),
            "--output-len", str(a.decode_len), "--concurrency", "1", "--seed", str(rep),
            "--json", path]
    run_checked(argv, path + ".log")
    with open(path) as f:
        d = json.load(f)
    prompt_len = d["prompt_tokens"] / d["config"]["num_prompts"]
    fig = {"prefill_tok_s": prompt_len / (d["ttft_ms"]["p50"] / 1000),
           "decode_tok_s": 1000 / d["tpot_ms"]["p50"]}
    # What a decode token reads (absent from builds before the floor account).
    if "decode_weight_bytes" in d:
        fig["weight_bytes"] = d["decode_weight_bytes"]
        fig["kv_bytes_per_ctx_token"] = d["engine"]["kv_bytes_per_token"]
    # And a prompt token's arithmetic (absent from builds before the prefill floor).
    if "matmul_flops_per_token" in d:
        fig["matmul_flops_per_token"] = d["matmul_flops_per_token"]
        fig["attention_flops_per_pair"] = d["attention_flops_per_pair"]
    return fig


def ceilings_path(a):
    if a.ceilings:
        return a.ceilings
    path = os.path.join(os.path.dirname(os.path.abspath(a.tokamak)), "bench", "tokamak_ceilings")
    return path if os.access(path, os.X_OK) else None


def measure_ceilings(a, out_dir, rep, pass_bytes):
    """tokamak_ceilings' row at a.threads: among others the best read burst (read_bw) and the
    median of passes over a buffer of a decode token's bytes (read_bw_pass), in bytes/s, and
    the int8 dot rates in ops/s."""
    path = os.path.join(out_dir, f"ceilings-r{rep}.json")
    mib = max(16, int(pass_bytes / (1 << 20)))
    run_checked([ceilings_path(a), "--threads", str(a.threads), "--dram-mib", str(mib),
                 "--json", path], path + ".log")
    with open(path) as f:
        return json.load(f)["rows"][0]


def decode_token_bytes(a, fig):
    """A decode token's bytes: the weights once, the KV cache at the run's mean context (the
    prompt and half the decoded tokens)."""
    return fig["weight_bytes"] + fig["kv_bytes_per_ctx_token"] * (a.prefill_len + a.decode_len / 2)


def decode_floors(token_bytes, read_bw, read_bw_pass):
    """The floors of a decode token of token_bytes: those bytes read at the best burst and at
    the median one-pass rate measured right after the repeat."""
    floors = {"token_mb": token_bytes / 1e6, "read_bw_gb_s": read_bw / 1e9,
              "read_bw_pass_gb_s": read_bw_pass / 1e9, "floor_ms": 1000 * token_bytes / read_bw}
    if read_bw_pass > 0:
        floors["floor_pass_ms"] = 1000 * token_bytes / read_bw_pass
    return floors


def prompt_attention_flops_per_token(a, fig):
    """A prompt token's attention arithmetic, over the causal prompt's mean context,
    (prefill_len + 1) / 2 keys."""
    return fig["attention_flops_per_pair"] * (a.prefill_len + 1) / 2


def prompt_flops_per_token(a, fig):
    """A prompt token's arithmetic: the layer matmuls once, and its attention."""
    return fig["matmul_flops_per_token"] + prompt_attention_flops_per_token(a, fig)


# The int8 ceilings a prefill floor is given against: the vector units' dot-product peak
# (vpdpbusd, or AVX2's where there is no VNNI), the same products in 32-element blocks with
# each block's float scaling (the quantized formats' own ceiling: the best of the VNNI and
# AMX forms), and AMX's 32-deep tile peak. Absent ones (older tokamak_ceilings, no AMX) are
# left out.
PREFILL_CEILINGS = [("int8 dot", lambda r: max(r.get("dot_i8_vnni", 0), r.get("dot_i8_avx2", 0))),
                    ("32-blocks scaled", lambda r: max(r.get("dot_i8_blocks_vnni", 0),
                                                       r.get("dot_i8_blocks_amx", 0))),
                    ("AMX 32 deep", lambda r: r.get("dot_i8_amx_k32", 0))]

# The ceilings above count attention's FLOPs at an int8 rate, which float arithmetic cannot
# reach: both engines compute attention in fp32 from the f16 cache. This one takes each part
# at its own unit's peak, the matmuls at the int8 dot peak and attention at the fp32 FMA
# peak, and adds the two times; its GOPS is the rate that sum makes of the token's FLOPs.
BY_UNIT_CEILING = "int8 dot + fp32 FMA"


def fma_f32_rate(row):
    return max(row.get("fma_f32_avx512", 0), row.get("fma_f32_avx2", 0))


def prefill_floors(flops_per_token, row, prefill_tok_s, attention_flops_per_token=0.0):
    """The prefill floor against each ceiling of PREFILL_CEILINGS that the row has, and the
    by-unit one where the token has attention FLOPs and the row an fp32 FMA rate: the
    ceiling in GOPS, the floor in tokens/s, and each engine's prefill as a multiple of its
    time (floor tokens/s / achieved)."""
    entry = {"gflop_per_token": flops_per_token / 1e9, "ceilings": {}}

    def add(name, floor_tok_s):
        entry["ceilings"][name] = {
            "gops": floor_tok_s * flops_per_token / 1e9, "floor_tok_s": floor_tok_s,
            **{f"{n}_x": floor_tok_s / t for n, t in prefill_tok_s.items()}}

    for name, rate in PREFILL_CEILINGS:
        ops = rate(row)
        if ops > 0:
            add(name, ops / flops_per_token)
    dot, fma = PREFILL_CEILINGS[0][1](row), fma_f32_rate(row)
    if attention_flops_per_token > 0 and dot > 0 and fma > 0:
        seconds = (flops_per_token - attention_flops_per_token) / dot + attention_flops_per_token / fma
        add(BY_UNIT_CEILING, 1 / seconds)
    return entry


def run_offline(a, samples):
    """The offline repeats; returns the floor accounts, one entry per repeat with "decode"
    and, where tokamak reports its arithmetic, "prefill" (empty without tokamak_ceilings or
    a tokamak that reports its bytes per token)."""
    out_dir = os.path.join(a.out, "offline")
    os.makedirs(out_dir, exist_ok=True)
    row = f"batch 1, {a.threads} threads"
    floors = []
    if ceilings_path(a) is None:
        log("no tokamak_ceilings next to the tokamak binary (or --ceilings): no floor account")
    for rep in range(a.offline_repeats):
        order = [("tokamak", offline_tokamak), ("llama.cpp", offline_llamacpp)]
        if rep % 2:
            order.reverse()
        figs = {}
        for name, fn in order:
            la = loadavg()
            fig = fn(a, out_dir, rep)
            figs[name] = fig
            fig["load"] = la
            log(f"offline r{rep} {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in fig.items()
                                                       if isinstance(v, (int, float)))
                + f" (load -> {loadavg():.1f})")
            if "best_build" in fig:
                PEER_BUILDS.append(fig["best_build"])
                log(f"offline r{rep} llama.cpp's best build per metric: {fig['best_build']}")
            samples.add("offline", row, name, {k: v for k, v in fig.items()
                                               if k in ("prefill_tok_s", "decode_tok_s",
                                                        "decode_d0_tok_s", "load")})
        t = figs["tokamak"]
        if ceilings_path(a) is None or "weight_bytes" not in t:
            continue
        token_bytes = decode_token_bytes(a, t)
        try:
            ceilings = measure_ceilings(a, out_dir, rep, token_bytes)
            bw, bw_pass = ceilings["read_bw"], ceilings.get("read_bw_pass", 0.0)
        except (RuntimeError, OSError, KeyError, ValueError) as e:
            # A side measurement: the comparison itself goes on without it.
            log(f"offline r{rep}: no ceilings, no floor for this repeat ({e})")
            continue
        decode = decode_floors(token_bytes, bw, bw_pass)
        for name in stats.SERVERS:
            decode[f"{name}_ms"] = 1000 / figs[name]["decode_tok_s"]
        log(f"offline r{rep} decode floors: "
            + ", ".join(f"{k} {v:.1f}" for k, v in decode.items()))
        entry = {"decode": decode}
        if "matmul_flops_per_token" in t:
            entry["prefill"] = prefill_floors(
                prompt_flops_per_token(a, t), ceilings,
                {name: figs[name]["prefill_tok_s"] for name in stats.SERVERS},
                prompt_attention_flops_per_token(a, t))
            log(f"offline r{rep} prefill floors: {json.dumps(entry['prefill'])}")
        floors.append(entry)
    return floors


def floor_table(floors):
    """Markdown: per repeat, a decode token's bytes, the read rates measured after it, the
    floors and each engine's decode time as a multiple of them."""
    out = ["| repeat | MB a token | read GB/s: best burst / median pass | floor ms: burst / "
           "pass | tokamak ms | x burst floor | x pass floor | llama.cpp ms | x burst floor | "
           "x pass floor |", "|---" * 10 + "|"]
    for i, f in enumerate(e["decode"] for e in floors):
        cells = [str(i), f"{f['token_mb']:.1f}",
                 f"{f['read_bw_gb_s']:.1f} / {f['read_bw_pass_gb_s']:.1f}",
                 f"{f['floor_ms']:.1f} / {f.get('floor_pass_ms', float('nan')):.1f}"]
        for name in stats.SERVERS:
            ms = f[f"{name}_ms"]
            cells += [f"{ms:.1f}", f"**{ms / f['floor_ms']:.2f}**",
                      f"{ms / f['floor_pass_ms']:.2f}" if "floor_pass_ms" in f else "-"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def prefill_floor_table(floors):
    """Markdown: per repeat and ceiling, the ceiling measured after the repeat, the prefill
    floor at it, and each engine's prefill time as a multiple of that floor."""
    out = ["| repeat | GFLOP a token | ceiling | GOPS | floor tok/s | "
           + " | ".join(f"{n} x floor" for n in stats.SERVERS) + " |",
           "|---" * (5 + len(stats.SERVERS)) + "|"]
    for i, e in enumerate(floors):
        p = e.get("prefill")
        if p is None:
            continue
        for name, c in p["ceilings"].items():
            out.append(f"| {i} | {p['gflop_per_token']:.3f} | {name} | {c['gops']:.1f} | "
                       f"{c['floor_tok_s']:.1f} | "
                       + " | ".join(f"**{c[n + '_x']:.2f}**" for n in stats.SERVERS) + " |")
    return "\n".join(out)


# --- serving ------------------------------------------------------------------------------

def workloads(a):
    """(section, row, client flags, concurrency) of every measured serving run, in order."""
    w = []
    if "batch1" in a.workloads:
        w.append(("batch-1", f"random {a.batch1_input_len}/{a.batch1_output_len}, c=1",
                  ["--dataset", "random", "--input-len", str(a.batch1_input_len),
                   "--output-len", str(a.batch1_output_len),
                   "--num-prompts", str(a.batch1_prompts)], 1))
    if "sweep" in a.workloads:
        for c in a.sweep:
            n = max(a.min_prompts, a.prompts_per_slot * c)
            w.append(("sweep", f"random {a.input_len}/{a.output_len}, c={c}",
                      ["--dataset", "random", "--input-len", str(a.input_len),
                       "--output-len", str(a.output_len), "--num-prompts", str(n)], c))
    if "prefix" in a.workloads:
        n = a.prefix_groups * a.prefix_questions
        w.append(("prefix-shared",
                  f"{a.prefix_groups} x {a.prefix_len}-token prefix + {a.prefix_question_len}"
                  f"/{a.prefix_output_len}, {n} prompts, c={a.prefix_concurrency}",
                  ["--dataset", "prefix-shared", "--prefix-groups", str(a.prefix_groups),
                   "--prefix-len", str(a.prefix_len), "--input-len", str(a.prefix_question_len),
                   "--output-len", str(a.prefix_output_len), "--num-prompts", str(n)],
                  a.prefix_concurrency))
    return w


def bench_serve(a, server, flags, concurrency, seed, json_path, label):
    argv = [a.tokamak, "bench", "serve", "--tokenizer-model", a.model, "--url", server.url,
            "--endpoint", "completions", "--model", MODEL_NAME, *flags,
            "--max-concurrency", str(concurrency), "--seed", str(seed), "--json", json_path,
            "--label", label]
    run_checked(argv, json_path + ".log")
    runs = stats.load_runs(json_path)
    if len(runs) != 1:
        raise RuntimeError(f"{json_path}: expected one run, found {len(runs)}")
    run = runs[0]
    if run.get("failed"):
        raise RuntimeError(f"{json_path}: {run['failed']} requests failed: {run.get('errors')}")
    return run


def ctx_per_seq(a):
    need = max(a.batch1_input_len + a.batch1_output_len, a.input_len + a.output_len,
               a.prefix_len + a.prefix_question_len + a.prefix_output_len)
    need = int(need * 1.1) + 16  # the tokenizer may make a few more tokens than asked
    return max(a.ctx, -(-need // 256) * 256)


def run_serving(a, samples):
    out_dir = os.path.join(a.out, "serve")
    os.makedirs(out_dir, exist_ok=True)
    parallel = max([1, a.prefix_concurrency] + (a.sweep if "sweep" in a.workloads else []))
    ctx = ctx_per_seq(a)
    log(f"servers: {a.threads} threads, {parallel} slots / max sequences, {ctx} tokens of "
        f"context per sequence, KV for {parallel * ctx} tokens")
    srv = {
        "tokamak": servers.tokamak_server(a.tokamak, a.model, a.threads, parallel, ctx,
                                          MODEL_NAME, os.path.join(out_dir, "tokamak-serve.log")),
        "llama.cpp": servers.llama_server(a.llama_server, a.model, a.threads, parallel, ctx,
                                          MODEL_NAME, os.path.join(out_dir, "llama-server.log"),
                                          env=llama_env(a)),
    }
    try:
        for s in srv.values():
            s.start()
            log(f"{s.name} healthy at {s.url}")
        # Warm-up: the first requests of a server pay for thread start-up and page faults.
        for name, s in srv.items():
            bench_serve(a, s, ["--dataset", "random", "--input-len", "64", "--output-len", "16",
                               "--num-prompts", "4"], 2, 999, os.path.join(out_dir,
                               f"warmup-{'tokamak' if name == 'tokamak' else 'llamacpp'}.json"),
                        name)
        # An idle server must not take CPU from the measured one.
        before = {n: s.cpu_seconds() for n, s in srv.items()}
        time.sleep(3)
        for n, s in srv.items():
            idle = (s.cpu_seconds() - before[n]) / 3
            log(f"{n} idle: {idle * 100:.1f}% of a core")
            if idle > 0.05:
                log(f"WARNING: {n} uses CPU while idle; the other's figures are affected")

        runs_by_key = {}  # (section, row, server) -> [(figures, run)]
        wl = workloads(a)
        for rep in range(a.repeats):
            order = ["tokamak", "llama.cpp"] if rep % 2 == 0 else ["llama.cpp", "tokamak"]
            for i, (section, row, flags, conc) in enumerate(wl):
                seed = 1000 * (rep + 1) + i  # the same for both servers, new for every run
                for name in order:
                    tag = "tokamak" if name == "tokamak" else "llamacpp"
                    path = os.path.join(out_dir, f"{section}-c{conc}-{i}-r{rep}-{tag}.json")
                    la = loadavg()
                    run = bench_serve(a, srv[name], flags, conc, seed, path, name)
                    fig = stats.serve_figures(run)
                    fig["load"] = la
                    samples.add(section, row, name, fig)
                    runs_by_key.setdefault((section, row, name), []).append((fig, run))
                    log(f"r{rep} {section} [{row}] {name}: {fig['output_tok_s']:.1f} out tok/s, "
                        f"TTFT p50 {fig['ttft_p50']:.0f} ms, TPOT p50 {fig['tpot_p50']:.1f} ms "
                        f"(load {la:.1f} -> {loadavg():.1f})")
        return runs_by_key
    finally:
        for s in srv.values():
            s.stop()


def median_run(entries):
    """The run whose output tokens/s is the median of its repeats (the lower middle one)."""
    entries = sorted(entries, key=lambda e: e[0]["output_tok_s"] or 0)
    return entries[(len(entries) - 1) // 2][1]


def write_reports(a, runs_by_key):
    """HTML reports (through `tokamak bench report`) from the median repeat of every run:
    the sweep (both servers on each chart), and batch-1 + prefix-shared."""
    groups = {"report.html": [], "report-batch1-prefix.html": []}
    for (section, row, name), entries in runs_by_key.items():
        run = dict(median_run(entries))
        if section == "sweep":
            run["label"] = name
            groups["report.html"].append(run)
        else:
            run["label"] = f"{name} {section}"
            groups["report-batch1-prefix.html"].append(run)
    for html, runs in groups.items():
        if not runs:
            continue
        runs.sort(key=lambda r: (r["label"], r["settings"].get("max_concurrency") or 0))
        src = os.path.join(a.out, html.replace(".html", "-runs.json"))
        with open(src, "w") as f:
            json.dump({"bench": "serve", "version": 1, "runs": runs}, f)
        out = os.path.join(a.out, html)
        run_checked(report_argv(a, src, out), out + ".log")
        log(f"wrote {out}")


def report_argv(a, runs_json, html_out):
    return [a.tokamak, "bench", "report", runs_json, "--html", html_out]


# --- main ---------------------------------------------------------------------------------

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokamak", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--llama-bench-also", action="append", default=[],
                    help="another llama.cpp build's llama-bench, run beside --llama-bench "
                    "offline; each metric takes the best build (repeatable)")
    ap.add_argument("--ceilings", help="tokamak_ceilings binary (default: bench/ next to "
                    "--tokamak)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--offline-repeats", type=int)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-offline", action="store_true")
    ap.add_argument("--skip-serve", action="store_true")
    ap.add_argument("--workloads", default="batch1,sweep,prefix")
    ap.add_argument("--sweep", default="1,4,16,32")
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--prompts-per-slot", type=int, default=2)
    ap.add_argument("--min-prompts", type=int, default=8)
    ap.add_argument("--batch1-input-len", type=int, default=512)
    ap.add_argument("--batch1-output-len", type=int, default=128)
    ap.add_argument("--batch1-prompts", type=int, default=4)
    ap.add_argument("--prefix-groups", type=int, default=2)
    ap.add_argument("--prefix-questions", type=int, default=8)
    ap.add_argument("--prefix-len", type=int, default=1000)
    ap.add_argument("--prefix-question-len", type=int, default=32)
    ap.add_argument("--prefix-output-len", type=int, default=64)
    ap.add_argument("--prefix-concurrency", type=int, default=4)
    ap.add_argument("--prefill-len", type=int, default=512)
    ap.add_argument("--decode-len", type=int, default=128)
    ap.add_argument("--offline-prompts", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=2048, help="least context per sequence")
    ap.add_argument("--llama-omp", choices=["brief-spin", "passive", "default"],
                    default="brief-spin",
                    help="how llama.cpp's OpenMP threads wait at barriers (see llama_env)")
    a = ap.parse_args()
    if a.quick:
        # A smoke test of everything, well under 10 minutes on 2 cores with the default model.
        a.repeats = 1
        a.offline_prompts = 2
        a.min_prompts = 4
        a.prompts_per_slot = 1
        a.input_len, a.output_len = 128, 64
        a.batch1_prompts = 2
        a.batch1_output_len = 64
        a.prefix_questions = 4
        a.prefix_len = 512
        a.prefix_output_len = 32
    if a.offline_repeats is None:
        a.offline_repeats = a.repeats
    a.sweep = [int(c) for c in a.sweep.split(",") if c]
    a.workloads = set(a.workloads.split(","))
    return a


def tokamak_revision():
    """The source tree's commit (with -dirty when it has changes), or "unknown"."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        out = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main():
    a = parse_args()
    os.makedirs(a.out, exist_ok=True)
    global LOG_FILE
    LOG_FILE = os.path.join(a.out, "compare.log")
    samples = stats.Samples()
    t0 = time.monotonic()
    log(f"model {a.model}, {a.threads} threads, {a.repeats} repeats, out {a.out}, "
        f"llama.cpp OpenMP wait {a.llama_omp} ({LLAMA_OMP_TEXT[a.llama_omp]}), "
        f"load average {loadavg():.1f}")
    floors = [] if a.skip_offline else run_offline(a, samples)
    if PEER_BUILDS:
        a.llama_server = serving_build(a, PEER_BUILDS)
        log(f"llama.cpp serves from {a.llama_server}")
    runs_by_key = {} if a.skip_serve else run_serving(a, samples)

    with open(os.path.join(a.out, "samples.json"), "w") as f:
        json.dump({"model": a.model, "threads": a.threads, "repeats": a.repeats,
                   "rows": samples.to_json()}, f, indent=1)
    lines = [f"# tokamak beside llama.cpp: {os.path.basename(a.model)}, {a.threads} threads",
             "",
             f"median (min-max) over {a.repeats} alternating runs (offline: "
             f"{a.offline_repeats}); ratio = tokamak / llama.cpp of the medians (above 1 is "
             "better for tok/s, below 1 is better for latencies). llama.cpp with "
             f"{LLAMA_OMP_TEXT[a.llama_omp]}"
             f"; load average during the runs {min(LOADS):.1f}-{max(LOADS):.1f} "
             f"({a.threads} threads measured)", "",
             f"{time.strftime('%Y-%m-%d %H:%M %Z')}, tokamak {tokamak_revision()}; command: "
             f"`{' '.join(shlex.quote(x) for x in sys.argv)}`", ""]
    if not a.skip_offline:
        lines += ["## Offline, batch 1 (llama-bench pp512 / tg128 at depth 512 vs tokamak "
                  "bench throughput --concurrency 1)", "",
                  stats.detailed_table(samples, "offline", stats.OFFLINE_METRICS + [
                      ("decode_d0_tok_s", "decode tok/s at depth 0 (llama-bench only)",
                       "higher"), stats.LOAD_METRIC]), "",
                  "Per repeat, tokamak / llama.cpp:", "",
                  stats.per_repeat_table(samples, "offline", stats.OFFLINE_METRICS), ""]
        if PEER_BUILDS:
            lines += [peer_builds_text(a, PEER_BUILDS), ""]
    if floors:
        lines += ["## Decode floor (bytes a decode token reads at the measured read bandwidth)",
                  "", "The weights once and the KV cache at the mean context "
                  f"({a.prefill_len} + {a.decode_len} / 2 tokens). Read bandwidth from "
                  f"`tokamak_ceilings --threads {a.threads}` after each repeat: the best short "
                  "burst, and the median of one-pass reads of a buffer of those bytes (what a "
                  "decode step, one pass over them, can expect).", "", floor_table(floors), ""]
        if any("prefill" in e for e in floors):
            lines += ["## Prefill floor (a prompt token's arithmetic at the measured int8 rates)",
                      "", "The layer matmuls once and attention over the causal prompt's mean "
                      f"context, ({a.prefill_len} + 1) / 2 keys (`tokamak bench throughput`'s "
                      "prefill FLOPs), against `tokamak_ceilings`' int8 rates after each "
                      "repeat: the dot-product peak, the same in 32-element blocks with each "
                      "block's float scaling (the quantized formats' own ceiling, the best of "
                      "its VNNI and AMX forms), and AMX's 32-deep tile peak; and by unit: the "
                      "matmuls at the int8 dot peak plus attention, which both engines compute "
                      "in fp32, at the fp32 FMA peak.", "",
                      prefill_floor_table(floors), ""]
    for section in ("batch-1", "sweep", "prefix-shared"):
        if any(s == section for s, _ in samples.rows):
            lines += [f"## Serving: {section}", "",
                      stats.detailed_table(samples, section,
                                           stats.SERVE_METRICS + [stats.LOAD_METRIC]), "",
                      stats.ratio_table(samples, section, stats.SERVE_METRICS), "",
                      "Per repeat, tokamak / llama.cpp:", "",
                      stats.per_repeat_table(samples, section, [stats.SERVE_METRICS[0],
                                                                stats.SERVE_METRICS[3]]), ""]
    summary = "\n".join(lines)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(summary + "\n")
    print("\n" + summary)
    if runs_by_key:
        write_reports(a, runs_by_key)
    log(f"done in {time.monotonic() - t0:.0f} s; tables in {os.path.join(a.out, 'summary.md')}")


if __name__ == "__main__":
    main()
