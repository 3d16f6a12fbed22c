"""POST /v1/completions through the official openai client."""

import time

import pytest

from conftest import MODEL_ID

PROMPT = "The capital of France is"
GREEDY = dict(model=MODEL_ID, temperature=0)
IGNORE_EOS = {"ignore_eos": True}


def greedy_text(client, prompt, max_tokens=12):
    r = client.completions.create(prompt=prompt, max_tokens=max_tokens, extra_body=IGNORE_EOS,
                                  **GREEDY)
    return r.choices[0].text


def check_usage(usage, server, prompts, completion_tokens):
    assert usage.prompt_tokens == sum(len(server.tokenize(prompt=p)) for p in prompts)
    assert usage.completion_tokens == completion_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_non_stream_fields(server, client):
    before = int(time.time())
    r = client.completions.create(prompt=PROMPT, max_tokens=8, **GREEDY)
    assert r.id.startswith("cmpl-")
    assert r.object == "text_completion"
    assert before - 1 <= r.created <= int(time.time()) + 1
    assert r.model == MODEL_ID
    assert len(r.choices) == 1
    c = r.choices[0]
    assert c.index == 0
    assert isinstance(c.text, str) and c.text
    assert c.finish_reason in ("stop", "length")
    assert c.logprobs is None
    assert 1 <= r.usage.completion_tokens <= 8
    assert r.usage.prompt_tokens == len(server.tokenize(prompt=PROMPT))
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # Greedy output of this tiny model for this prompt.
    assert "Paris" in c.text


def test_max_tokens_length_and_usage(server, client):
    r = client.completions.create(prompt=PROMPT, max_tokens=13, extra_body=IGNORE_EOS, **GREEDY)
    assert r.choices[0].finish_reason == "length"
    check_usage(r.usage, server, [PROMPT], 13)


def test_stream_matches_non_stream(client):
    full = client.completions.create(prompt=PROMPT, max_tokens=16, extra_body=IGNORE_EOS,
                                     **GREEDY)
    chunks = list(client.completions.create(prompt=PROMPT, max_tokens=16, stream=True,
                                            extra_body=IGNORE_EOS, **GREEDY))
    assert len(chunks) >= 2  # streamed, not one blob
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("cmpl-")
    for c in chunks:
        assert c.object == "text_completion"
        assert c.model == MODEL_ID
        assert isinstance(c.created, int)
        assert c.usage is None  # not asked for
        assert [ch.index for ch in c.choices] == [0]
    finish = [c.choices[0].finish_reason for c in chunks]
    assert finish[-1] == "length"
    assert all(f is None for f in finish[:-1])
    text = "".join(c.choices[0].text for c in chunks)
    assert text == full.choices[0].text


def test_stream_include_usage(server, client):
    chunks = list(client.completions.create(
        prompt=PROMPT, max_tokens=8, stream=True, stream_options={"include_usage": True},
        extra_body=IGNORE_EOS, **GREEDY))
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    check_usage(last.usage, server, [PROMPT], 8)
    for c in chunks[:-1]:
        assert c.usage is None
        assert len(c.choices) == 1
    assert chunks[-2].choices[0].finish_reason == "length"


def test_prompt_list_of_strings(server, client):
    prompts = ["The capital of France is", "One, two, three,"]
    singles = [greedy_text(client, p) for p in prompts]
    r = client.completions.create(prompt=prompts, max_tokens=12, extra_body=IGNORE_EOS, **GREEDY)
    assert [c.index for c in r.choices] == [0, 1]
    assert [c.text for c in r.choices] == singles
    check_usage(r.usage, server, prompts, 24)


def test_prompt_token_ids(server, client):
    ids = server.tokenize(prompt=PROMPT)
    r = client.completions.create(prompt=ids, max_tokens=12, extra_body=IGNORE_EOS, **GREEDY)
    assert r.choices[0].text == greedy_text(client, PROMPT)
    assert r.usage.prompt_tokens == len(ids)


def test_prompt_list_of_token_lists(server, client):
    prompts = ["The capital of France is", "One, two, three,"]
    ids = [server.tokenize(prompt=p) for p in prompts]
    r = client.completions.create(prompt=ids, max_tokens=12, extra_body=IGNORE_EOS, **GREEDY)
    assert [c.index for c in r.choices] == [0, 1]
    assert [c.text for c in r.choices] == [greedy_text(client, p) for p in prompts]
    assert r.usage.prompt_tokens == sum(map(len, ids))


def test_echo(client):
    r = client.completions.create(prompt=PROMPT, max_tokens=6, echo=True, extra_body=IGNORE_EOS,
                                  **GREEDY)
    text = r.choices[0].text
    assert text.startswith(PROMPT)
    assert text[len(PROMPT):] == greedy_text(client, PROMPT, max_tokens=6)
    assert r.usage.completion_tokens == 6


def test_echo_stream(client):
    chunks = list(client.completions.create(prompt=PROMPT, max_tokens=6, echo=True, stream=True,
                                            extra_body=IGNORE_EOS, **GREEDY))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == PROMPT + greedy_text(client, PROMPT, max_tokens=6)


def test_logprobs_top_alternatives(client):
    r = client.completions.create(prompt=PROMPT, max_tokens=5, logprobs=3, extra_body=IGNORE_EOS,
                                  **GREEDY)
    c = r.choices[0]
    lp = c.logprobs
    assert lp is not None
    n = r.usage.completion_tokens
    assert n == 5
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == n
    assert len(lp.text_offset) == n
    assert "".join(lp.tokens) == c.text
    # text_offset: where each token starts in the returned text.
    assert lp.text_offset == [len("".join(lp.tokens[:i])) for i in range(n)]
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert isinstance(logprob, float) and logprob <= 0
        assert 3 <= len(top) <= 4  # the top 3, and the chosen token when it is not among them
        assert all(v <= 0 for v in top.values())
        # Greedy: the chosen token is the most likely one.
        assert token in top
        assert top[token] == pytest.approx(logprob, abs=1e-4)
        assert logprob == pytest.approx(max(top.values()), abs=1e-4)


def test_logprobs_stream(client):
    chunks = list(client.completions.create(prompt=PROMPT, max_tokens=6, logprobs=2, stream=True,
                                            extra_body=IGNORE_EOS, **GREEDY))
    text, tokens, offsets = "", [], []
    for c in chunks:
        ch = c.choices[0]
        if ch.logprobs and ch.logprobs.tokens:
            assert ch.logprobs.text_offset[0] == len(text)  # offsets run across chunks
            tokens += ch.logprobs.tokens
            offsets += ch.logprobs.text_offset
            assert all(len(t) == 2 for t in ch.logprobs.top_logprobs)
        text += ch.text
    assert len(tokens) == 6
    assert "".join(tokens) == text
    assert offsets == [len("".join(tokens[:i])) for i in range(6)]


def test_logprobs_text_offset_in_characters(client):
    # Emoji: several tokens each. OpenAI's text_offset indexes the returned text (characters),
    # so every offset lies within it.
    r = client.completions.create(prompt="Emoji list: 🚀 rocket, 🍕 pizza, 🐍", max_tokens=12,
                                  logprobs=1, **GREEDY)
    c = r.choices[0]
    assert "🐍" in c.text
    offsets = c.logprobs.text_offset
    assert offsets[0] == 0
    assert offsets == sorted(offsets)
    assert offsets[-1] < len(c.text), (offsets, len(c.text), c.text)


def test_logprobs_zero_gives_chosen_token_only(client):
    r = client.completions.create(prompt=PROMPT, max_tokens=4, logprobs=0, extra_body=IGNORE_EOS,
                                  **GREEDY)
    lp = r.choices[0].logprobs
    assert len(lp.token_logprobs) == 4
    assert all(isinstance(v, float) and v <= 0 for v in lp.token_logprobs)


def test_n_samples_with_seed(client):
    kwargs = dict(model=MODEL_ID, prompt="Once upon a time", max_tokens=16, n=3, temperature=1.0,
                  seed=1234, extra_body=IGNORE_EOS)
    r = client.completions.create(**kwargs)
    assert [c.index for c in r.choices] == [0, 1, 2]
    texts = [c.text for c in r.choices]
    assert len(set(texts)) >= 2, texts  # samples differ
    assert r.usage.completion_tokens == 48
    assert all(c.finish_reason == "length" for c in r.choices)
    # The same seed repeats all n samples.
    assert [c.text for c in client.completions.create(**kwargs).choices] == texts


def test_n_samples_stream(client):
    chunks = list(client.completions.create(
        model=MODEL_ID, prompt="Once upon a time", max_tokens=8, n=2, temperature=1.0, seed=7,
        stream=True, extra_body=IGNORE_EOS))
    texts = {0: "", 1: ""}
    finished = set()
    for c in chunks:
        for ch in c.choices:
            assert ch.index not in finished
            texts[ch.index] += ch.text
            if ch.finish_reason is not None:
                assert ch.finish_reason == "length"
                finished.add(ch.index)
    assert finished == {0, 1}
    assert all(texts.values())


def test_prompt_list_with_n(client):
    prompts = ["The capital of France is", "One, two, three,"]
    r = client.completions.create(prompt=prompts, n=2, max_tokens=4, extra_body=IGNORE_EOS,
                                  **GREEDY)
    # OpenAI's order: prompt i, sample j -> index i * n + j.
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert r.choices[0].text == r.choices[1].text  # greedy samples of one prompt agree
    assert r.choices[2].text == r.choices[3].text
    assert r.usage.completion_tokens == 16


def test_seed_reproducible(client):
    def sample(seed):
        return client.completions.create(model=MODEL_ID, prompt="Once upon a time", max_tokens=16,
                                         temperature=1.0, seed=seed,
                                         extra_body=IGNORE_EOS).choices[0].text

    first = sample(42)
    assert sample(42) == first
    others = [sample(s) for s in (43, 44, 45)]
    assert any(o != first for o in others), (first, others)


def find_stop(text):
    """A word of `text` that first appears after the start: (stop string, text before it)."""
    for word in text.split()[1:]:
        if len(word) >= 3:
            i = text.index(word)
            if i > 0:
                return word, text[:i]
    pytest.fail(f"no stop word found in {text!r}")


def test_stop_string(client):
    full = greedy_text(client, "Once upon a time", max_tokens=24)
    stop, before = find_stop(full)
    r = client.completions.create(prompt="Once upon a time", max_tokens=24, stop=stop,
                                  extra_body=IGNORE_EOS, **GREEDY)
    c = r.choices[0]
    assert c.finish_reason == "stop"
    assert c.text == before
    assert stop not in c.text
    assert r.usage.completion_tokens < 24


def test_stop_list_and_stream(client):
    full = greedy_text(client, "Once upon a time", max_tokens=24)
    stop, before = find_stop(full)
    stops = ["never-appears-xyz", stop]
    r = client.completions.create(prompt="Once upon a time", max_tokens=24, stop=stops,
                                  extra_body=IGNORE_EOS, **GREEDY)
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == before
    chunks = list(client.completions.create(prompt="Once upon a time", max_tokens=24, stop=stops,
                                            stream=True, extra_body=IGNORE_EOS, **GREEDY))
    assert "".join(c.choices[0].text for c in chunks) == before
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_ignore_eos(server, client):
    # A chat-formatted prompt (its special tokens as ids) that the model answers briefly and
    # then ends with its end-of-turn token.
    ids = server.tokenize(messages=[
        {"role": "user", "content": "What is 2+2? Answer with a number only."}])
    short = client.completions.create(prompt=ids, max_tokens=32, **GREEDY)
    assert short.choices[0].finish_reason == "stop"
    assert short.usage.completion_tokens < 32
    long = client.completions.create(prompt=ids, max_tokens=32, extra_body=IGNORE_EOS, **GREEDY)
    assert long.choices[0].finish_reason == "length"
    assert long.usage.completion_tokens == 32
    assert long.choices[0].text.startswith(short.choices[0].text)


def test_multibyte_text_streams_whole_characters(client):
    # The model continues with emoji, each split across several byte tokens: no chunk may
    # carry half a character, and the stream adds up to the whole answer.
    prompt = "Emoji list: 🚀 rocket, 🍕 pizza, 🐍"
    full = client.completions.create(prompt=prompt, max_tokens=24, extra_body=IGNORE_EOS,
                                     **GREEDY).choices[0].text
    chunks = list(client.completions.create(prompt=prompt, max_tokens=24, stream=True,
                                            extra_body=IGNORE_EOS, **GREEDY))
    pieces = [c.choices[0].text for c in chunks]
    assert "".join(pieces) == full
    assert "🐍" in full
    # A replacement character may only stand for bytes left incomplete at the very end.
    assert "\ufffd" not in full.rstrip("\ufffd"), full
    assert all("\ufffd" not in p for p in pieces[:-2]), pieces
