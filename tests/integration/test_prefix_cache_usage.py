"""The prefix cache as clients see it: usage.prompt_tokens_details.cached_tokens in whole and
streamed responses, and `tokamak bench serve --dataset multiturn` (per-turn TTFT and hit rate
from that field) against the real server."""

import json
import subprocess

from conftest import MODEL_ID, MODEL_PATH, TOKAMAK_BIN

BLOCK = 16  # the server's default KV block size
# About 100 tokens: several full blocks.
LONG = ("The history of the printing press begins in the fifteenth century, when movable type "
        "changed how books were made, how ideas travelled across Europe and how quickly news, "
        "science and religious arguments could reach readers in distant towns and cities. ")


def cached_tokens(usage) -> int:
    assert usage.prompt_tokens_details is not None, usage
    return usage.prompt_tokens_details.cached_tokens


def test_cached_tokens_whole_and_streamed(server, client):
    prompt = LONG + "A second sentence makes this prompt unique to this test."
    first = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=2, temperature=0)
    n = first.usage.prompt_tokens
    assert n > 3 * BLOCK
    # Nothing of this prompt was cached before (no other test sends it).
    assert cached_tokens(first.usage) < BLOCK
    again = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=2, temperature=0)
    # The whole prompt is cached in full blocks; the last token is always computed.
    assert cached_tokens(again.usage) == min(n // BLOCK * BLOCK, n - 1)
    chunks = list(client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=2,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    usage = chunks[-1].usage
    assert usage is not None and usage.prompt_tokens == n
    assert cached_tokens(usage) == min(n // BLOCK * BLOCK, n - 1)


def test_no_prefix_cache_reports_zero(make_server):
    srv = make_server("--kv-tokens", "4096", "-t", "2", "--no-prefix-cache")
    c = srv.client()
    for _ in range(2):
        r = c.chat.completions.create(model=MODEL_ID, temperature=0, max_tokens=2,
                                      messages=[{"role": "user", "content": LONG}])
        assert cached_tokens(r.usage) == 0


def run_bench(server, tmp_path, *flags):
    out = tmp_path / "multiturn.json"
    args = [str(TOKAMAK_BIN), "bench", "serve", "--url", server.base_url,
            "--tokenizer-model", str(MODEL_PATH), "--dataset", "multiturn", "--json", str(out),
            *flags]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout, json.loads(out.read_text())


def test_bench_serve_multiturn(server, client, tmp_path):
    stdout, doc = run_bench(server, tmp_path, "--conversations", "3", "--turns", "4",
                            "--input-len", "40", "--output-len", "8", "--max-concurrency", "2",
                            "--seed", "5")
    assert "per turn" in stdout and "hit rate" in stdout, stdout
    [run] = doc["runs"]
    assert run["completed"] == 12 and run["failed"] == 0, run["errors"]
    assert run["settings"]["dataset"] == "multiturn"
    assert run["settings"]["endpoint"] == "chat"
    turns = run["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3, 4]
    assert all(t["completed"] == 3 and t["failed"] == 0 for t in turns), turns
    prompts = [t["prompt_tokens_mean"] for t in turns]
    # Each turn adds the previous reply (8 tokens) and a 40-token message to the history.
    assert all(b > a + 40 for a, b in zip(prompts, prompts[1:])), prompts
    rates = [t["prefix_hit_rate"] for t in turns]
    assert all(r is not None for r in rates), rates  # tokamak reports cached tokens
    assert all(r > 0 for r in rates[1:]), rates
    assert rates[-1] > 0.4, rates  # by turn 4 most of the prompt is history
    # The printed table has one row per turn, with a percentage for every turn.
    table = stdout[stdout.index("per turn"):].splitlines()[2:]
    rows = [line.split() for line in table if line.strip()]
    assert [r[0] for r in rows] == ["1", "2", "3", "4"], stdout
    assert all(r[-1].endswith("%") for r in rows), stdout
