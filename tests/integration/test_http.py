"""HTTP details over raw connections: keep-alive, Connection: close, Server header, CORS, the
body limit flag and the read timeout."""

import http.client
import json
import socket
import time

import requests

from conftest import DEFAULT_FLAGS, MODEL_ID, assert_openai_error


def test_keep_alive_and_connection_close(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        first_sock = None
        # Several requests, streamed and not, on one connection.
        for stream in [False, True, False]:
            b = json.dumps({"model": MODEL_ID, "prompt": "Hi", "max_tokens": 2,
                            "stream": stream}).encode()
            conn.request("POST", "/v1/completions", body=b,
                         headers={"Content-Type": "application/json"})
            first_sock = first_sock or conn.sock
            assert conn.sock is first_sock  # no reconnect
            r = conn.getresponse()
            assert r.status == 200
            assert r.getheader("Server") == "tokamak"
            data = r.read()
            if stream:
                assert r.getheader("Transfer-Encoding") == "chunked"
                assert data.rstrip().endswith(b"data: [DONE]")
            else:
                assert json.loads(data)["object"] == "text_completion"
            assert not r.will_close
        conn.request("GET", "/health", headers={"Connection": "close"})
        r = conn.getresponse()
        assert r.status == 200
        r.read()
        assert r.will_close
    finally:
        conn.close()


def test_connection_close_closes(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):  # until the server closes its side
            data += chunk
    assert data.startswith(b"HTTP/1.1 200")
    assert data.endswith(b'{"status":"ok"}')


def test_pipelined_requests(server):
    req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(req * 3)
        data = b""
        deadline = time.monotonic() + 10
        while data.count(b"HTTP/1.1 200") < 3 and time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    assert data.count(b"HTTP/1.1 200") == 3, data


def test_no_cors_headers_by_default(server):
    r = requests.get(server.url("/health"), headers={"Origin": "http://example.com"}, timeout=10)
    assert "Access-Control-Allow-Origin" not in r.headers


def test_cors(make_server):
    srv = make_server(*DEFAULT_FLAGS, "--cors-origin", "*")
    r = requests.options(srv.url("/v1/chat/completions"), timeout=10, headers={
        "Origin": "http://example.com", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert r.status_code == 204
    assert r.headers["Access-Control-Allow-Origin"] == "*"
    methods = r.headers.get("Access-Control-Allow-Methods", "")
    assert "POST" in methods, r.headers
    allowed = r.headers.get("Access-Control-Allow-Headers", "").lower()
    assert "authorization" in allowed and "content-type" in allowed, r.headers
    for resp in [requests.get(srv.url("/v1/models"), timeout=10),
                 requests.post(srv.url("/v1/completions"), json={"prompt": 1}, timeout=10),
                 requests.get(srv.url("/nope"), timeout=10)]:
        assert resp.headers.get("Access-Control-Allow-Origin") == "*", resp.headers


def test_max_body_bytes_flag(make_server):
    srv = make_server(*DEFAULT_FLAGS, "--max-body-bytes", "4096")
    ok = {"model": MODEL_ID, "prompt": "a " * 100, "max_tokens": 1}
    assert requests.post(srv.url("/v1/completions"), json=ok, timeout=30).status_code == 200
    big = {"model": MODEL_ID, "prompt": "a " * 4000, "max_tokens": 1}
    assert_openai_error(requests.post(srv.url("/v1/completions"), json=big, timeout=30), 413)
    # The server goes on.
    assert requests.post(srv.url("/v1/completions"), json=ok, timeout=30).status_code == 200


def test_read_timeout(make_server):
    srv = make_server(*DEFAULT_FLAGS, "--read-timeout", "1")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        # Headers promise a body that never comes.
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        t0 = time.monotonic()
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        waited = time.monotonic() - t0
    assert 0.5 < waited < 4, waited
    assert data == b"" or data.startswith(b"HTTP/1.1 408"), data[:200]
    assert requests.get(srv.url("/health"), timeout=10).status_code == 200


def test_expect_100_continue(server):
    # curl sends this for bodies over 1 KiB and would otherwise wait a second.
    body = json.dumps({"model": MODEL_ID, "prompt": "hi", "max_tokens": 1,
                       "user": "u" * 2000}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body))
        sock.settimeout(0.5)
        assert sock.recv(1000).startswith(b"HTTP/1.1 100")
        sock.settimeout(30)
        sock.sendall(body)
        data = b""
        while b'"usage"' not in data:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    assert data.startswith(b"HTTP/1.1 200"), data[:200]


def test_idle_timeout(make_server):
    srv = make_server(*DEFAULT_FLAGS, "--idle-timeout", "0.5")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        data = sock.recv(65536)
        assert data.startswith(b"HTTP/1.1 200")
        t0 = time.monotonic()
        while sock.recv(65536):  # until the server closes the idle connection
            pass
        assert 0.3 < time.monotonic() - t0 < 3
