"""Errors over raw HTTP: status codes and OpenAI's error object. The last test checks that the
shared server still answers normally after all of them."""

import http.client
import json
import socket
import threading
import time

import pytest
import requests

from conftest import MODEL_ID, RawStream, assert_openai_error, wait_until

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"


def post(server, path, body, **kwargs):
    if isinstance(body, bytes):
        return requests.post(server.url(path), data=body,
                             headers={"Content-Type": "application/json"}, timeout=30, **kwargs)
    return requests.post(server.url(path), json=body, timeout=30, **kwargs)


def completion(**fields):
    return {"model": MODEL_ID, "prompt": "Hello", "max_tokens": 4, **fields}


def chat(**fields):
    return {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hello"}],
            "max_tokens": 4, **fields}


def case_id(case):
    """A readable test id: the endpoint and the fields that differ from a valid request."""
    path, body = case[0], case[1]
    base = chat() if path == CHAT else completion()
    diff = {k: v for k, v in body.items() if base.get(k) != v}
    return ("chat" if path == CHAT else "completions") + json.dumps(diff)[:70]


def cases(*tuples):
    return [pytest.param(*t, id=case_id(t)) for t in tuples]


def names_param(err, field):
    """The error points at the field, by `param` or in its message."""
    return (err["param"] or "").startswith(field) or field in err["message"]


@pytest.mark.parametrize("path", [COMPLETIONS, CHAT, "/tokenize"])
@pytest.mark.parametrize("body", [b'{"model": ', b"not json", b"", b"[1, 2]", b'"text"'])
def test_malformed_json(server, path, body):
    err = assert_openai_error(post(server, path, body), 400, type_="invalid_request_error")
    assert err["message"]


@pytest.mark.parametrize("path,body,field", cases(
    (COMPLETIONS, completion(max_tokens="x"), "max_tokens"),
    (COMPLETIONS, completion(prompt={"text": "hi"}), "prompt"),
    (COMPLETIONS, completion(prompt=5), "prompt"),
    (COMPLETIONS, completion(prompt=[]), "prompt"),
    (COMPLETIONS, completion(temperature="hot"), "temperature"),
    (COMPLETIONS, completion(stop=5), "stop"),
    (COMPLETIONS, completion(stream="yes"), "stream"),
    (COMPLETIONS, completion(seed="abc"), "seed"),
    (COMPLETIONS, completion(model=5), "model"),
    (CHAT, chat(messages=5), "messages"),
    (CHAT, chat(messages=[]), "messages"),
    (CHAT, chat(messages=[{"role": "user"}]), "messages"),
    (CHAT, chat(messages=[{"role": "wizard", "content": "hi"}]), "messages"),
    (CHAT, chat(messages=[{"role": "user", "content": 5}]), "messages"),
    (CHAT, chat(messages=[{"role": "user", "content": [{"type": "image_url"}]}]), "messages"),
    (CHAT, chat(max_completion_tokens="x"), "max_completion_tokens"),
    (CHAT, chat(logprobs="yes"), "logprobs"),
))
def test_wrong_types(server, path, body, field):
    err = assert_openai_error(post(server, path, body), 400, type_="invalid_request_error")
    assert names_param(err, field), err


@pytest.mark.parametrize("path,body,field", cases(
    (COMPLETIONS, completion(stream_options={"include_usage": True}), "stream_options"),
    (CHAT, chat(top_logprobs=2), "top_logprobs"),
    (CHAT, chat(tools=[{"type": "function", "function": {"name": "f"}}]), "tools"),
    (COMPLETIONS, completion(n=2, best_of=3), "best_of"),
    (COMPLETIONS, completion(suffix="end"), "suffix"),
))
def test_unsupported_combinations(server, path, body, field):
    err = assert_openai_error(post(server, path, body), 400, type_="invalid_request_error")
    assert names_param(err, field), err


def test_missing_required_fields(server):
    assert_openai_error(post(server, COMPLETIONS, {"model": MODEL_ID}), 400)
    assert_openai_error(post(server, CHAT, {"model": MODEL_ID}), 400)


@pytest.mark.parametrize("path,body,field", cases(
    (COMPLETIONS, completion(temperature=-1), "temperature"),
    (COMPLETIONS, completion(top_p=2), "top_p"),
    (COMPLETIONS, completion(top_p=0), "top_p"),
    (COMPLETIONS, completion(n=0), "n"),
    (COMPLETIONS, completion(n=1000), "n"),
    (COMPLETIONS, completion(logprobs=50), "logprobs"),
    (COMPLETIONS, completion(logprobs=-1), "logprobs"),
    (COMPLETIONS, completion(max_tokens=0), "max_tokens"),
    (COMPLETIONS, completion(max_tokens=-5), "max_tokens"),
    (COMPLETIONS, completion(presence_penalty=3), "presence_penalty"),
    (COMPLETIONS, completion(frequency_penalty=-3), "frequency_penalty"),
    (COMPLETIONS, completion(prompt=[[1, 2], [-1]]), "prompt"),
    (COMPLETIONS, completion(prompt=[10**9]), "prompt"),
    (CHAT, chat(temperature=-1), "temperature"),
    (CHAT, chat(top_p=2), "top_p"),
    (CHAT, chat(n=0), "n"),
    (CHAT, chat(n=1000), "n"),
    (CHAT, chat(logprobs=True, top_logprobs=50), "top_logprobs"),
    (CHAT, chat(max_completion_tokens=0), "max_completion_tokens"),
    (CHAT, chat(min_p=2), "min_p"),
    (CHAT, chat(repetition_penalty=0), "repetition_penalty"),
    (COMPLETIONS, completion(stop=[""]), "stop"),
    (COMPLETIONS, completion(stop=["s"] * 100), "stop"),
    (COMPLETIONS, completion(stop_token_ids=[-1]), "stop_token_ids"),
    # 2**32 + 2 must not wrap around to token 2.
    (COMPLETIONS, completion(stop_token_ids=[2**32 + 2]), "stop_token_ids"),
    (COMPLETIONS, completion(prompt=["a"] * 200), "n"),  # prompts x n choices
))
def test_out_of_range(server, path, body, field):
    err = assert_openai_error(post(server, path, body), 400, type_="invalid_request_error")
    assert names_param(err, field), err


@pytest.mark.parametrize("path,body", [(COMPLETIONS, completion(model="gpt-4")),
                                       (CHAT, chat(model="no-such-model"))])
def test_unknown_model(server, path, body):
    err = assert_openai_error(post(server, path, body), 400)
    assert body["model"] in err["message"]


def test_prompt_longer_than_context(server):
    limit = requests.get(server.url("/v1/models"), timeout=10).json()["data"][0]["max_model_len"]
    text = "hello " * (limit + 16)
    assert len(server.tokenize(prompt=text)) > limit
    assert_openai_error(post(server, COMPLETIONS, completion(prompt=text)), 400,
                        type_="invalid_request_error")
    assert_openai_error(post(server, COMPLETIONS, completion(prompt=[[1] * (limit + 1)])), 400)
    body = chat(messages=[{"role": "user", "content": text}])
    assert_openai_error(post(server, CHAT, body), 400, type_="invalid_request_error")
    body["stream"] = True  # refused before any stream starts
    assert_openai_error(post(server, CHAT, body), 400)


def test_unknown_route(server):
    for path in ["/v1/nothing", "/v2/completions", "/v1/completions/extra"]:
        assert_openai_error(requests.get(server.url(path), timeout=10), 404)
    assert_openai_error(post(server, "/nope", completion()), 404)


def test_wrong_method(server):
    for method, path in [("GET", COMPLETIONS), ("GET", CHAT), ("DELETE", COMPLETIONS),
                         ("POST", "/health"), ("POST", "/v1/models")]:
        r = requests.request(method, server.url(path), timeout=10)
        assert_openai_error(r, 405)
        assert r.headers.get("Allow"), r.headers


def read_http_response(sock, timeout=10.0):
    """(status, headers, body) of one Content-Length response read from a raw socket."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, headers, body


def test_body_too_large_from_content_length(server):
    # Refused from Content-Length alone, before the body is sent.
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % (16 * 1024 * 1024 + 1))
        status, _, body = read_http_response(sock)
    assert status == 413
    assert set(json.loads(body)["error"]) >= {"message", "type", "param", "code"}


def test_body_too_large_sent(server):
    body = b'{"prompt": "' + b"a" * (17 * 1024 * 1024) + b'"}'
    try:
        r = requests.post(server.url(COMPLETIONS), data=body,
                          headers={"Content-Type": "application/json"}, timeout=30)
    except requests.ConnectionError:
        # The server may answer 413 and close while the body is still being sent; the client
        # then sees a reset instead of the answer. The point is that the server survives.
        pass
    else:
        assert_openai_error(r, 413)
    assert requests.get(server.url("/health"), timeout=10).status_code == 200


def test_header_too_large(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (20 * 1024) +
                     b"\r\n\r\n")
        status, _, _ = read_http_response(sock)
    assert status == 431


def test_bad_http(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        sock.settimeout(10)
        data = sock.recv(65536)
    assert data.startswith(b"HTTP/1.1 400"), data[:200]


def test_health(server):
    r = requests.get(server.url("/health"), timeout=10)
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_queue_full_429(make_server):
    # One running, one waiting: the rest are refused at once with 429.
    srv = make_server("--kv-tokens", "16384", "-t", "2", "--max-queue", "1", "--max-seqs", "1")
    body = completion(prompt="Count to a thousand:", max_tokens=2000, ignore_eos=True,
                      stream=True)
    streams = []
    refusals = []  # (headers, body) of the 429 answers

    def read_head(s):
        try:
            if s.read_head() == 429:
                refusals.append((s.headers, s.read_body()))
        except (OSError, http.client.HTTPException):
            pass  # aborted below while still waiting for its turn

    try:
        for _ in range(5):
            s = RawStream(srv, COMPLETIONS, body, timeout=30, read_head=False)
            streams.append(s)
            threading.Thread(target=read_head, args=(s,), daemon=True).start()
            time.sleep(0.05)
        assert wait_until(lambda: len(refusals) >= 3, 15), [s.status for s in streams]
        for headers, raw in refusals:
            assert headers.get("Retry-After", "").isdigit(), dict(headers)
            err = json.loads(raw)["error"]
            assert err["code"] == "queue_full", err
            assert set(err) >= {"message", "type", "param", "code"}
        assert all(s.status in (None, 200, 429) for s in streams)
    finally:
        for s in streams:
            s.abort()
    # With the long requests gone, the server takes work again.
    srv.wait_idle(timeout=10)
    r = requests.post(srv.url(COMPLETIONS), json=completion(max_tokens=2), timeout=30)
    assert r.status_code == 200, r.text


def test_server_still_answers(server, client):
    r = requests.get(server.url("/health"), timeout=10)
    assert r.status_code == 200
    out = client.completions.create(model=MODEL_ID, prompt="The capital of France is",
                                    max_tokens=8, temperature=0)
    assert "Paris" in out.choices[0].text
    out = client.chat.completions.create(
        model=MODEL_ID, messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
    assert out.choices[0].message.content
    server.check_alive()
