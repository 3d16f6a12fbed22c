"""/tokenize, /detokenize and /v1/models."""

import requests

from conftest import DEFAULT_FLAGS, MODEL_ID, assert_openai_error


def tokenize(server, **body):
    r = requests.post(server.url("/tokenize"), json=body, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def detokenize(server, tokens):
    r = requests.post(server.url("/detokenize"), json={"tokens": tokens}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["prompt"]


def max_model_len(server):
    return requests.get(server.url("/v1/models"), timeout=10).json()["data"][0]["max_model_len"]


def test_models_shape(server, client):
    r = requests.get(server.url("/v1/models"), timeout=10)
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "list"
    assert len(body["data"]) == 1
    m = body["data"][0]
    assert m["id"] == MODEL_ID
    assert m["object"] == "model"
    assert isinstance(m["created"], int) and m["created"] > 1_600_000_000
    assert m["owned_by"] == "tokamak"
    assert isinstance(m["max_model_len"], int) and m["max_model_len"] > 0

    ids = [model.id for model in client.models.list()]
    assert ids == [MODEL_ID]


def test_tokenize_shape(server):
    body = tokenize(server, prompt="Hello world, this is tokamak.")
    assert set(body) >= {"tokens", "count", "max_model_len"}
    assert body["tokens"] and all(isinstance(t, int) and t >= 0 for t in body["tokens"])
    assert body["count"] == len(body["tokens"])
    assert body["max_model_len"] == max_model_len(server)


def test_round_trip(server):
    for text in ["Hello world, this is tokamak.",
                 "  leading spaces, tabs\tand\nnewlines\n",
                 "héllo wörld, 你好, emoji 🚀 done"]:
        tokens = tokenize(server, prompt=text, add_special_tokens=False)["tokens"]
        assert detokenize(server, tokens) == text
        # With the default special tokens (a BOS, for models that add one) the text still
        # comes back at the end.
        tokens = tokenize(server, prompt=text)["tokens"]
        assert detokenize(server, tokens).endswith(text)


def test_tokenize_messages_applies_chat_template(server):
    text = "Which city is the capital of France?"
    plain = tokenize(server, prompt=text, add_special_tokens=False)["tokens"]
    chat = tokenize(server, messages=[{"role": "user", "content": text}])
    assert chat["count"] == len(chat["tokens"]) > len(plain)
    rendered = detokenize(server, chat["tokens"])
    assert text in rendered
    assert "<|im_start|>" in rendered  # SmolLM2's template


def test_tokenize_errors(server):
    r = requests.post(server.url("/tokenize"), data=b"{not json", timeout=10)
    assert_openai_error(r, 400)
    r = requests.post(server.url("/tokenize"), json={"prompt": 12}, timeout=10)
    assert_openai_error(r, 400)
    r = requests.post(server.url("/detokenize"), json={"tokens": "abc"}, timeout=10)
    assert_openai_error(r, 400)
    r = requests.post(server.url("/detokenize"), json={"tokens": [1, 10**9]}, timeout=10)
    assert_openai_error(r, 400)
    r = requests.post(server.url("/detokenize"), json={"tokens": [-1]}, timeout=10)
    assert_openai_error(r, 400)


def test_served_model_name(make_server):
    srv = make_server(*DEFAULT_FLAGS, "--served-model-name", "my-model")
    client = srv.client()
    assert [m.id for m in client.models.list()] == ["my-model"]
    r = client.completions.create(model="my-model", prompt="Hi", max_tokens=2)
    assert r.model == "my-model"
    r = requests.post(srv.url("/v1/completions"),
                      json={"model": MODEL_ID, "prompt": "Hi", "max_tokens": 2}, timeout=30)
    assert_openai_error(r, 400)  # the file name is no longer a model id
