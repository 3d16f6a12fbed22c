"""GET /metrics: Prometheus text that prometheus_client parses, with the design's families, and
counters that move by exactly what the requests did."""

import math

import requests

from conftest import DEFAULT_FLAGS, MODEL_ID, Metrics, wait_until

HISTOGRAMS = [
    "time_to_first_token_seconds", "inter_token_latency_seconds",
    "request_time_per_output_token_seconds", "e2e_request_latency_seconds",
    "request_queue_time_seconds", "request_prompt_tokens", "request_generation_tokens",
    "iteration_tokens",
]
GAUGES = ["num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"]
COUNTERS = ["prompt_tokens", "generation_tokens", "request_success", "num_preemptions",
            "prefix_cache_queries", "prefix_cache_hits",
            "request_errors"]  # exposed with the _total suffix
P = "tokamak:"


def scrape(srv) -> Metrics:
    r = requests.get(srv.url("/metrics"), timeout=10)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain"), r.headers
    assert "version=0.0.4" in r.headers["Content-Type"], r.headers
    return Metrics(r.text)


def make_traffic(srv):
    client = srv.client()
    client.completions.create(model=MODEL_ID, prompt="Hello there", max_tokens=8,
                              extra_body={"ignore_eos": True})
    list(client.chat.completions.create(model=MODEL_ID, stream=True, max_tokens=8,
                                        messages=[{"role": "user", "content": "Hi"}]))
    r = requests.post(srv.url("/v1/completions"), json={"model": MODEL_ID, "prompt": "x",
                                                        "temperature": -1}, timeout=10)
    assert r.status_code == 400


def test_families_present(server):
    make_traffic(server)
    m = scrape(server)
    for name in HISTOGRAMS:
        assert m.families[P + name].type == "histogram", name
    for name in GAUGES:
        assert m.families[P + name].type == "gauge", name
    for name in COUNTERS:
        assert m.families[P + name].type == "counter", name
        assert f"# TYPE {P}{name}_total counter" in m.text
    for family in m.families.values():
        assert family.name.startswith(P), family.name
        assert family.documentation, f"{family.name} has no HELP"
    for s in m.samples:
        assert s.labels.get("model_name") == MODEL_ID, s
    assert m.has(P + "request_errors_total", code="400")
    assert m.has(P + "num_preemptions_total")
    for name in GAUGES:
        assert m.has(P + name)
    assert 0 <= m.get(P + "kv_cache_usage_perc") <= 1


def test_histograms_consistent(server):
    make_traffic(server)
    m = scrape(server)
    for name in HISTOGRAMS:
        family = m.families[P + name]
        series = {}  # labels without le -> [(le, value)]
        counts, sums = {}, {}
        for s in family.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            if s.name.endswith("_bucket"):
                series.setdefault(key, []).append((float(s.labels["le"]), s.value))
            elif s.name.endswith("_count"):
                counts[key] = s.value
            elif s.name.endswith("_sum"):
                sums[key] = s.value
        assert series, f"{name} has no buckets"
        for key, buckets in series.items():
            les = [le for le, _ in buckets]
            assert les == sorted(les), (name, les)
            assert math.isinf(les[-1]), f"{name} lacks the +Inf bucket"
            values = [v for _, v in buckets]
            assert values == sorted(values), f"{name} buckets not cumulative: {values}"
            assert values[-1] == counts[key], (name, values[-1], counts[key])
            assert key in sums
            assert counts[key] > 0, f"{name} observed nothing after traffic"
            assert sums[key] >= 0


def test_counters_move_exactly(make_server):
    srv = make_server(*DEFAULT_FLAGS)
    before = scrape(srv)
    assert before.get(P + "generation_tokens_total") == 0
    assert before.get(P + "num_requests_running") == 0

    client = srv.client()
    r = client.completions.create(model=MODEL_ID, prompt="The capital of France is",
                                  max_tokens=10, extra_body={"ignore_eos": True}, temperature=0)
    assert r.usage.completion_tokens == 10

    def counted():
        return scrape(srv).get(P + "request_success_total", finished_reason="length") == 1
    # The request's metrics may land just after its response.
    assert wait_until(counted, 2)
    m = scrape(srv)
    assert m.get(P + "generation_tokens_total") == 10
    assert m.get(P + "prompt_tokens_total") == r.usage.prompt_tokens
    assert m.get(P + "request_success_total") == 1
    assert m.get(P + "request_success_total", finished_reason="stop") == 0
    assert m.get(P + "request_prompt_tokens_count") == 1
    assert m.get(P + "request_prompt_tokens_sum") == r.usage.prompt_tokens
    assert m.get(P + "request_generation_tokens_count") == 1
    assert m.get(P + "request_generation_tokens_sum") == 10
    assert m.get(P + "time_to_first_token_seconds_count") == 1
    assert m.get(P + "e2e_request_latency_seconds_count") == 1
    assert m.get(P + "request_queue_time_seconds_count") == 1
    assert m.get(P + "request_time_per_output_token_seconds_count") == 1
    assert m.get(P + "inter_token_latency_seconds_count") == 9  # gaps between 10 tokens
    assert m.get(P + "iteration_tokens_count") >= 1
    # Every token computed went through some step: prompt + all sampled but the last.
    assert m.get(P + "iteration_tokens_sum") >= r.usage.prompt_tokens + 9
    assert m.get(P + "e2e_request_latency_seconds_sum") >= \
        m.get(P + "time_to_first_token_seconds_sum") > 0
    assert m.get(P + "num_requests_running") == 0
    assert m.get(P + "kv_cache_usage_perc") == 0

    # n=2 chat, streamed: one request, two samples.
    list(client.chat.completions.create(
        model=MODEL_ID, messages=[{"role": "user", "content": "Hi"}], max_tokens=6, n=2,
        temperature=1, seed=1, stream=True, extra_body={"ignore_eos": True}))
    assert wait_until(lambda: scrape(srv).get(P + "generation_tokens_total") == 22, 2)
    m = scrape(srv)
    assert m.get(P + "request_success_total", finished_reason="length") == 3  # per sample
    assert m.get(P + "request_generation_tokens_count") == 2  # per request
    assert m.get(P + "request_prompt_tokens_count") == 2

    # An answered error counts under its status code.
    for _ in range(2):
        requests.post(srv.url("/v1/completions"), json={"model": MODEL_ID, "prompt": "x",
                                                        "n": 0}, timeout=10)
    requests.get(srv.url("/nope"), timeout=10)
    m = scrape(srv)
    assert m.get(P + "request_errors_total", code="400") == 2
    assert m.get(P + "request_errors_total", code="404") == 1


def test_stop_reason_counted(make_server):
    srv = make_server(*DEFAULT_FLAGS)
    r = srv.client().completions.create(model=MODEL_ID, prompt="One, two, three,", max_tokens=16,
                                        stop=",", temperature=0)
    assert r.choices[0].finish_reason == "stop"
    assert wait_until(lambda: scrape(srv).get(P + "request_success_total",
                                              finished_reason="stop") == 1, 2)
    assert scrape(srv).get(P + "generation_tokens_total") == r.usage.completion_tokens


def test_dashboard_data(server):
    make_traffic(server)
    r = requests.get(server.url("/dashboard/data"), timeout=10)
    assert r.status_code == 200
    d = r.json()
    assert d["model"] == MODEL_ID
    assert {"time", "running", "waiting", "totals", "window", "series", "kv"} <= set(d)
    assert {"requests", "prompt_tokens", "generation_tokens", "preemptions",
            "errors"} <= set(d["totals"])
    assert d["totals"]["generation_tokens"] > 0
    kv = d["kv"]
    assert {"blocks_total", "blocks_used", "usage", "block_size", "cells"} <= set(kv)
    assert set(kv["cells"]) <= set(".cus")
    assert {"blocks_cached", "prefix_cache_hit_rate"} <= set(kv)
    assert 0 < len(kv["cells"]) <= 4096
    assert isinstance(d["series"], list)


def test_prefix_cache_hits_grow(make_server):
    """The same long prompt twice: the second reuses the first's cached blocks (counted in
    tokens); with --no-prefix-cache nothing is looked up, and the answer is the same."""
    prompt = ("You are a careful assistant. Read the question, think about it, and answer in "
              "one short sentence without making anything up. ") * 4 + "What is the sea?"
    answers = {}
    for flags in ((), ("--no-prefix-cache",)):
        srv = make_server(*DEFAULT_FLAGS, *flags)
        client = srv.client()
        texts = []
        for _ in range(2):
            r = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=8,
                                          temperature=0)
            texts.append(r.choices[0].text)
            srv.wait_idle()
        m = scrape(srv)
        n_prompt = r.usage.prompt_tokens
        assert n_prompt >= 64
        if not flags:
            assert m.get(P + "prefix_cache_queries_total") == 2 * n_prompt
            # All the first request's full blocks of 16, at most the prompt less one token.
            hits = m.get(P + "prefix_cache_hits_total")
            assert (n_prompt // 16) * 16 - 16 < hits <= n_prompt - 1, (hits, n_prompt)
            kv = requests.get(srv.url("/dashboard/data"), timeout=10).json()["kv"]
            assert kv["blocks_cached"] >= n_prompt // 16
            assert 0 < kv["prefix_cache_hit_rate"] < 1
        else:
            assert m.get(P + "prefix_cache_queries_total") == 0
            assert m.get(P + "prefix_cache_hits_total") == 0
        assert texts[0] == texts[1]
        answers[flags] = texts[0]
    assert answers[()] == answers[("--no-prefix-cache",)]
