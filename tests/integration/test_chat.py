"""POST /v1/chat/completions through the official openai client."""

import time

import pytest

from conftest import MODEL_ID

GREEDY = dict(model=MODEL_ID, temperature=0)
IGNORE_EOS = {"ignore_eos": True}
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
FRANCE = {"role": "user", "content": "Which city is the capital of France?"}


def test_capital_of_france(server, client):
    before = int(time.time())
    r = client.chat.completions.create(messages=[SYSTEM, FRANCE], max_tokens=32, **GREEDY)
    assert r.id.startswith("chatcmpl-")
    assert r.object == "chat.completion"
    assert before - 1 <= r.created <= int(time.time()) + 1
    assert r.model == MODEL_ID
    assert len(r.choices) == 1
    c = r.choices[0]
    assert c.index == 0
    assert c.message.role == "assistant"
    assert "Paris" in c.message.content
    assert c.finish_reason in ("stop", "length")
    assert c.logprobs is None
    assert r.usage.prompt_tokens == len(server.tokenize(messages=[SYSTEM, FRANCE]))
    assert 1 <= r.usage.completion_tokens <= 32
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_multi_turn(server, client):
    messages = [
        SYSTEM,
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Nice to meet you, Ada!"},
        {"role": "user", "content": "What is my name?"},
    ]
    r = client.chat.completions.create(messages=messages, max_tokens=16, **GREEDY)
    assert r.choices[0].message.content
    assert r.usage.prompt_tokens == len(server.tokenize(messages=messages))
    # The earlier turns are part of the prompt.
    assert r.usage.prompt_tokens > len(server.tokenize(messages=[SYSTEM, messages[-1]]))


def test_content_parts(client):
    as_string = client.chat.completions.create(messages=[SYSTEM, FRANCE], max_tokens=16,
                                               **GREEDY)
    as_parts = client.chat.completions.create(
        messages=[{"role": "system", "content": [{"type": "text", "text": SYSTEM["content"]}]},
                  {"role": "user", "content": [{"type": "text", "text": FRANCE["content"]}]}],
        max_tokens=16, **GREEDY)
    assert as_parts.choices[0].message.content == as_string.choices[0].message.content
    two_parts = client.chat.completions.create(
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "Which city is the capital"},
            {"type": "text", "text": "of France?"}]}],
        max_tokens=16, **GREEDY)
    assert two_parts.choices[0].message.content


def test_stream_chunks(client):
    full = client.chat.completions.create(messages=[SYSTEM, FRANCE], max_tokens=24, **GREEDY)
    chunks = list(client.chat.completions.create(messages=[SYSTEM, FRANCE], max_tokens=24,
                                                 stream=True, **GREEDY))
    assert len(chunks) >= 3
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    for c in chunks:
        assert c.object == "chat.completion.chunk"
        assert c.model == MODEL_ID
        assert isinstance(c.created, int)
        assert [ch.index for ch in c.choices] == [0]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role in (None, "assistant") for c in chunks[1:])
    assert chunks[-1].choices[0].finish_reason == full.choices[0].finish_reason
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == full.choices[0].message.content
    assert sum(1 for c in chunks if c.choices[0].delta.content) >= 2  # content arrives in pieces


def test_stream_include_usage(server, client):
    messages = [SYSTEM, FRANCE]
    chunks = list(client.chat.completions.create(
        messages=messages, max_tokens=8, stream=True, stream_options={"include_usage": True},
        extra_body=IGNORE_EOS, **GREEDY))
    last = chunks[-1]
    assert last.choices == []
    assert last.usage.completion_tokens == 8
    assert last.usage.prompt_tokens == len(server.tokenize(messages=messages))
    assert last.usage.total_tokens == last.usage.prompt_tokens + 8
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-2].choices[0].finish_reason == "length"


def test_max_completion_tokens(client):
    r = client.chat.completions.create(messages=[SYSTEM, FRANCE], max_completion_tokens=5,
                                       extra_body=IGNORE_EOS, **GREEDY)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5


def test_stops_at_end_of_turn_unless_ignore_eos(client):
    messages = [{"role": "user", "content": "What is 2+2? Answer with a number only."}]
    short = client.chat.completions.create(messages=messages, max_tokens=32, **GREEDY)
    assert short.choices[0].finish_reason == "stop"
    assert short.usage.completion_tokens < 32
    assert "<|im_end|>" not in short.choices[0].message.content
    long = client.chat.completions.create(messages=messages, max_tokens=32,
                                          extra_body=IGNORE_EOS, **GREEDY)
    assert long.choices[0].finish_reason == "length"
    assert long.usage.completion_tokens == 32


def test_logprobs(client):
    r = client.chat.completions.create(messages=[SYSTEM, FRANCE], max_tokens=6, logprobs=True,
                                       top_logprobs=3, extra_body=IGNORE_EOS, **GREEDY)
    c = r.choices[0]
    content = c.logprobs.content
    assert len(content) == r.usage.completion_tokens == 6
    assert "".join(e.token for e in content) == c.message.content
    for e in content:
        assert isinstance(e.token, str)
        assert isinstance(e.logprob, float) and e.logprob <= 0
        assert e.bytes == list(e.token.encode("utf-8"))  # ASCII answer: whole characters
        assert len(e.top_logprobs) == 3
        tops = [t.logprob for t in e.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        for t in e.top_logprobs:
            assert isinstance(t.token, str) and t.logprob <= 0
            if "\ufffd" not in t.token:
                assert t.bytes == list(t.token.encode("utf-8"))
        # Greedy: the chosen token is the most likely one.
        assert e.top_logprobs[0].token == e.token
        assert e.top_logprobs[0].logprob == pytest.approx(e.logprob, abs=1e-4)


def test_logprobs_stream(client):
    chunks = list(client.chat.completions.create(
        messages=[SYSTEM, FRANCE], max_tokens=6, logprobs=True, top_logprobs=2, stream=True,
        extra_body=IGNORE_EOS, **GREEDY))
    entries = [e for c in chunks if c.choices[0].logprobs
               for e in (c.choices[0].logprobs.content or [])]
    assert len(entries) == 6
    assert all(len(e.top_logprobs) == 2 for e in entries)


def test_logprobs_without_top(client):
    r = client.chat.completions.create(messages=[SYSTEM, FRANCE], max_tokens=4, logprobs=True,
                                       extra_body=IGNORE_EOS, **GREEDY)
    content = r.choices[0].logprobs.content
    assert len(content) == 4
    assert all(e.top_logprobs == [] for e in content)


def test_n_samples(client):
    kwargs = dict(model=MODEL_ID, messages=[{"role": "user", "content": "Tell me a story."}],
                  max_tokens=12, n=2, temperature=1.0, seed=99, extra_body=IGNORE_EOS)
    r = client.chat.completions.create(**kwargs)
    assert [c.index for c in r.choices] == [0, 1]
    assert all(c.message.role == "assistant" for c in r.choices)
    assert r.choices[0].message.content != r.choices[1].message.content
    assert r.usage.completion_tokens == 24
    again = client.chat.completions.create(**kwargs)
    assert [c.message.content for c in again.choices] == [c.message.content for c in r.choices]


def test_logprobs_bytes_of_partial_characters(client):
    # Emoji take several tokens: a token's text may be a replacement character, its bytes are
    # the raw UTF-8 bytes, and the bytes of all tokens make up the answer.
    r = client.chat.completions.create(
        messages=[{"role": "user", "content": "Write three emoji: 🚀🍕🐍"}], max_tokens=12,
        logprobs=True, top_logprobs=1, **GREEDY)
    c = r.choices[0]
    raw = b"".join(bytes(e.bytes) for e in c.logprobs.content)
    assert raw.decode("utf-8", "replace") == c.message.content
    assert any(ord(ch) > 0xFFFF for ch in c.message.content)  # some emoji in the answer


def test_n_samples_stream(client):
    chunks = list(client.chat.completions.create(
        model=MODEL_ID, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=8,
        n=2, temperature=1.0, seed=5, stream=True, stream_options={"include_usage": True},
        extra_body=IGNORE_EOS))
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 16
    seen, finished, texts = set(), set(), {0: "", 1: ""}
    for c in chunks[:-1]:
        for ch in c.choices:
            if ch.index not in seen:  # each choice starts with the role
                assert ch.delta.role == "assistant"
                seen.add(ch.index)
            assert ch.index not in finished
            texts[ch.index] += ch.delta.content or ""
            if ch.finish_reason:
                assert ch.finish_reason == "length"
                finished.add(ch.index)
    assert seen == finished == {0, 1}
    assert texts[0] and texts[1]
