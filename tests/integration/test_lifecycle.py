"""Clients that go away, and SIGTERM: cancelled requests free their KV blocks at once, and the
server stops gracefully."""

import http.client
import json
import socket
import subprocess
import time

import pytest

from conftest import (DEFAULT_FLAGS, MODEL_ID, MODEL_PATH, TOKAMAK_BIN, RawStream,
                      sse_json_events, start_server, wait_until)

P = "tokamak:"
# Thousands of tokens: minutes of work if the server did not cancel it.
LONG = {"model": MODEL_ID, "prompt": "Count from one to ten thousand:", "max_tokens": 4000,
        "ignore_eos": True}
LONG_CHAT = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Write a long story."}],
             "max_tokens": 4000, "ignore_eos": True}


@pytest.fixture(scope="module")
def srv():
    s = start_server(*DEFAULT_FLAGS)
    yield s
    s.stop()


def wait_running(srv, n=1, timeout=10):
    assert wait_until(lambda: srv.metrics().get(P + "num_requests_running") == n, timeout), \
        f"never saw {n} running request(s)"


def aborted(srv):
    return srv.metrics().get(P + "request_success_total", finished_reason="abort")


@pytest.mark.parametrize("path,body", [("/v1/completions", LONG),
                                       ("/v1/chat/completions", LONG_CHAT),
                                       ("/v1/completions", {**LONG, "n": 2, "seed": 1})])
def test_stream_disconnect_cancels(srv, path, body):
    n = body.get("n", 1)
    aborts = aborted(srv)
    s = RawStream(srv, path, {**body, "stream": True})
    assert s.status == 200
    assert s.headers["Content-Type"].startswith("text/event-stream")
    events = s.events()
    for _ in range(3):
        json.loads(next(events))
    m = srv.metrics()
    assert m.get(P + "num_requests_running") >= 1
    assert m.get(P + "kv_cache_usage_perc") > 0
    s.abort()
    srv.wait_idle(timeout=3)  # every sample cancelled, its KV blocks freed
    # Counted per sample, like the other finish reasons.
    assert wait_until(lambda: aborted(srv) == aborts + n, 2), (aborted(srv), aborts)
    srv.check_alive()


def test_non_stream_disconnect_cancels(srv):
    aborts = aborted(srv)
    s = RawStream(srv, "/v1/completions", LONG, read_head=False)
    wait_running(srv)
    time.sleep(0.3)  # some tokens generated
    assert srv.metrics().get(P + "kv_cache_usage_perc") > 0
    s.abort()
    srv.wait_idle(timeout=3)
    assert wait_until(lambda: aborted(srv) == aborts + 1, 2)


def test_disconnect_while_waiting(make_server):
    # A request that never ran (queued behind another) is dropped from the queue.
    s1 = make_server(*DEFAULT_FLAGS, "--max-seqs", "1")
    first = RawStream(s1, "/v1/completions", {**LONG, "stream": True})
    next(first.events())
    second = RawStream(s1, "/v1/completions", {**LONG, "stream": True}, read_head=False)
    assert wait_until(lambda: s1.metrics().get(P + "num_requests_waiting") == 1, 5)
    second.abort()
    assert wait_until(lambda: s1.metrics().get(P + "num_requests_waiting") == 0, 3)
    assert s1.metrics().get(P + "num_requests_running") == 1
    first.abort()
    s1.wait_idle(timeout=3)


def connection_refused(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def test_sigterm_during_stream(make_server):
    s = make_server(*DEFAULT_FLAGS, "--shutdown-timeout", "2")
    stream = RawStream(s, "/v1/completions", {**LONG, "stream": True}, timeout=15)
    events = stream.events()
    for _ in range(3):
        json.loads(next(events))
    # A keep-alive connection opened before the signal.
    idle_conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    idle_conn.request("GET", "/health")
    assert idle_conn.getresponse().read()

    s.terminate()
    t0 = time.monotonic()
    # The listener closes at once, while the request in flight still runs: new connections
    # are refused.
    assert wait_until(lambda: connection_refused(s.port), 1.5), "still accepting after SIGTERM"
    assert s.alive(), "exited at once instead of giving the request in flight its time"
    # A new request on an open connection is refused (503), or the connection is closed.
    try:
        idle_conn.request("POST", "/v1/completions", body=json.dumps(LONG),
                          headers={"Content-Type": "application/json"})
        r = idle_conn.getresponse()
        assert r.status == 503, (r.status, r.read()[:200])
        assert set(json.loads(r.read())["error"]) >= {"message", "type", "param", "code"}
    except (ConnectionError, http.client.RemoteDisconnected):
        pass
    finally:
        idle_conn.close()

    # The request in flight (4000 tokens: it cannot complete in time) gets the shutdown
    # timeout, then ends with an error chunk.
    rest, done, cut = [], False, None
    try:
        for payload in events:
            if payload == "[DONE]":
                done = True
            else:
                rest.append(json.loads(payload))
    except (http.client.IncompleteRead, ConnectionError) as e:
        cut = e
    ended_after = time.monotonic() - t0
    assert cut is None, f"stream cut without a final chunk: {cut!r}"
    assert 1.5 < ended_after < 2 + 1.5, f"stream ended {ended_after:.1f} s after SIGTERM"
    assert len(rest) > 3, "no tokens streamed during the shutdown timeout"
    last = rest[-1]
    assert "error" in last, f"last chunk is not an error: {last}"
    assert {"message", "type"} <= set(last["error"]), last
    stream.close()

    code = s.wait_exit(timeout=10)
    assert code == 0, s.output()
    assert time.monotonic() - t0 < 2 + 3


def test_sigterm_lets_short_requests_finish(make_server):
    s = make_server(*DEFAULT_FLAGS, "--shutdown-timeout", "10")
    body = {**LONG, "max_tokens": 40, "stream": True}
    stream = RawStream(s, "/v1/completions", body, timeout=15)
    events = stream.events()
    json.loads(next(events))
    s.terminate()
    chunks, done = sse_json_events(stream)
    assert done, chunks[-1:]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    n_tokens = 1 + sum(1 for c in chunks if c["choices"][0]["text"])
    assert n_tokens >= 30  # not cut short (a chunk may hold more than one token)
    stream.close()
    assert s.wait_exit(timeout=15) == 0, s.output()


def test_sigterm_idle_exits_at_once(make_server):
    s = make_server(*DEFAULT_FLAGS)
    t0 = time.monotonic()
    s.stop()
    assert time.monotonic() - t0 < 2


def test_sigint_exits_zero(make_server):
    import signal
    s = make_server(*DEFAULT_FLAGS)
    s.process.send_signal(signal.SIGINT)
    assert s.wait_exit(timeout=10) == 0, s.output()


def run_serve_expecting_failure(*args, model=None):
    return subprocess.run(
        [str(TOKAMAK_BIN), "serve", "-m", str(model or MODEL_PATH), "-t", "1", *args],
        capture_output=True, text=True, timeout=30)


def test_port_in_use_fails_clearly():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = run_serve_expecting_failure("--port", str(port))
    assert r.returncode != 0
    assert str(port) in r.stderr, r.stderr


def test_bad_model_fails_clearly(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file")
    r = run_serve_expecting_failure("--port", "0", model=bad)
    assert r.returncode != 0
    assert "broken.gguf" in r.stderr, r.stderr
