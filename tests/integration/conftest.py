"""Fixtures and helpers that start the real `tokamak serve` and talk to it as clients do.

start_server(*extra_args) runs `$TOKAMAK_BIN serve --port 0 -m MODEL ...`, waits for the
`listening on` line and a 200 from /health, and returns a RunningServer. Its stdout and stderr
are drained by threads into a buffer (RunningServer.output()), so the pipes never fill.

Fixtures:
  server       one server for the whole session (default flags), shared by most tests
  make_server  a factory for servers with special flags; each is stopped after the test
  client       an openai.OpenAI client for `server`

Helpers (import them with `from conftest import ...`): RawStream (an HTTP request whose
response is read line by line and that can be dropped mid-way), Metrics (a parsed /metrics
scrape), wait_until, assert_openai_error.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import openai
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
TOKAMAK_BIN = Path(os.environ.get("TOKAMAK_BIN", REPO / "build" / "tokamak"))
MODEL_PATH = Path(
    os.environ.get("TOKAMAK_MODEL", REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
)
MODEL_ID = MODEL_PATH.name.removesuffix(".gguf")  # the server's default model id

# Flags of the shared server: a KV pool that fits every test and the 2 cores of CI.
DEFAULT_FLAGS = ("--kv-tokens", "16384", "-t", "2")

LISTENING_RE = re.compile(rb"tokamak serve: listening on http://([^/\s]+):(\d+)/")
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


class ServerDied(Exception):
    pass


class RunningServer:
    """One `tokamak serve` process. stop() sends SIGTERM and asserts a clean exit (code 0)."""

    def __init__(self, args: list[str], env: dict | None):
        self.args = args
        self._buf: list[bytes] = []
        self._lock = threading.Lock()
        self._listening = threading.Event()
        self._listen_match: re.Match | None = None
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self._drainers = [
            threading.Thread(target=self._drain, args=(self.process.stdout, True), daemon=True),
            threading.Thread(target=self._drain, args=(self.process.stderr, False), daemon=True),
        ]
        for t in self._drainers:
            t.start()
        self.host = ""
        self.port = 0
        self.base_url = ""
        self._stopped = False

    def _drain(self, pipe, is_stdout: bool) -> None:
        for line in iter(pipe.readline, b""):
            with self._lock:
                self._buf.append(line)
            if is_stdout and not self._listening.is_set():
                m = LISTENING_RE.search(line)
                if m:
                    self._listen_match = m
                    self._listening.set()
        pipe.close()

    def output(self) -> str:
        """Everything the server printed so far (stdout and stderr interleaved by arrival)."""
        with self._lock:
            return b"".join(self._buf).decode("utf-8", "replace")

    def _fail(self, why: str) -> None:
        self.kill()
        raise ServerDied(f"{why}\ncommand: {' '.join(self.args)}\n--- server output ---\n"
                         f"{self.output()}")

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not self._listening.wait(0.05):
            if self.process.poll() is not None:
                self._fail(f"server exited with code {self.process.returncode} before listening")
            if time.monotonic() > deadline:
                self._fail(f"no 'listening on' line within {timeout:.0f} s")
        m = self._listen_match
        self.host, self.port = m.group(1).decode(), int(m.group(2))
        assert self.port != 0, "the listening line must show the bound port, not 0"
        self.base_url = f"http://127.0.0.1:{self.port}"
        while True:
            if self.process.poll() is not None:
                self._fail(f"server exited with code {self.process.returncode} while loading")
            try:
                if requests.get(self.base_url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                self._fail(f"/health not 200 within {timeout:.0f} s")
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.process.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            self._fail(f"server died (exit code {self.process.returncode})")

    def terminate(self) -> None:
        """SIGTERM, without waiting."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)

    def wait_exit(self, timeout: float = STOP_TIMEOUT_S) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._fail(f"server still running {timeout:.0f} s after SIGTERM")
        for t in self._drainers:
            t.join(5)
        self._stopped = True
        return code

    def stop(self) -> None:
        """SIGTERM, wait, and assert exit code 0 (idempotent)."""
        if self._stopped:
            return
        if not self.alive():
            code = self.wait_exit()
            raise AssertionError(
                f"server had already exited with code {code}\n--- server output ---\n"
                f"{self.output()}")
        self.terminate()
        code = self.wait_exit()
        assert code == 0, f"server exited with code {code}\n--- server output ---\n{self.output()}"

    def kill(self) -> None:
        """SIGKILL (cleanup after a failure)."""
        if self.alive():
            self.process.kill()
            self.process.wait(10)
        self._stopped = True

    def client(self, api_key: str = "none", **kwargs) -> openai.OpenAI:
        """An official OpenAI client for this server (no retries: a 429 must show)."""
        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("timeout", 60)
        return openai.OpenAI(base_url=self.base_url + "/v1", api_key=api_key, **kwargs)

    def url(self, path: str) -> str:
        return self.base_url + path

    def metrics(self) -> "Metrics":
        r = requests.get(self.url("/metrics"), timeout=10)
        assert r.status_code == 200, r.text
        return Metrics(r.text)

    def tokenize(self, **body) -> list[int]:
        r = requests.post(self.url("/tokenize"), json=body, timeout=10)
        assert r.status_code == 200, r.text
        return r.json()["tokens"]

    def wait_idle(self, timeout: float = 5.0) -> "Metrics":
        """Polls /metrics until no request runs or waits and the KV pool is empty."""
        last: list[Metrics] = []

        def idle() -> bool:
            m = self.metrics()
            last[:] = [m]
            return (m.get("tokamak:num_requests_running") == 0
                    and m.get("tokamak:num_requests_waiting") == 0
                    and m.get("tokamak:kv_cache_usage_perc") == 0)

        if not wait_until(idle, timeout):
            m = last[0]
            raise AssertionError(
                f"server not idle {timeout} s later: running="
                f"{m.get('tokamak:num_requests_running')} waiting="
                f"{m.get('tokamak:num_requests_waiting')} kv_usage="
                f"{m.get('tokamak:kv_cache_usage_perc')}")
        return last[0]


def start_server(*extra_args: str, env: dict | None = None,
                 timeout: float = STARTUP_TIMEOUT_S) -> RunningServer:
    """Starts `tokamak serve --port 0 -m MODEL [extra_args]` and waits until /health is 200."""
    if not TOKAMAK_BIN.exists():
        pytest.fail(f"tokamak binary not found: {TOKAMAK_BIN} (build it, or set TOKAMAK_BIN)")
    args = [str(TOKAMAK_BIN), "serve", "--port", "0", "-m", str(MODEL_PATH), *extra_args]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    srv = RunningServer(args, full_env)
    srv.wait_ready(timeout)
    return srv


@pytest.fixture(scope="session")
def server():
    srv = start_server(*DEFAULT_FLAGS)
    yield srv
    srv.stop()


@pytest.fixture
def make_server():
    """make_server(*flags) -> RunningServer; every server it made is stopped after the test
    (exit code 0 asserted unless the test already stopped it)."""
    started: list[RunningServer] = []

    def make(*extra_args: str, env: dict | None = None) -> RunningServer:
        srv = start_server(*extra_args, env=env)
        started.append(srv)
        return srv

    yield make
    errors = []
    for srv in started:
        try:
            srv.stop()
        except Exception as e:  # stop every server even when one fails
            srv.kill()
            errors.append(e)
    if errors:
        raise errors[0]


@pytest.fixture
def client(server) -> openai.OpenAI:
    """A client of the shared server, which is idle when the test starts (so that no request
    left over by an earlier test runs alongside)."""
    server.check_alive()
    server.wait_idle(timeout=10)
    return server.client()


# ---------------------------------------------------------------------------------------------
# Helpers


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    """Polls predicate() until it is true (True) or timeout seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


def assert_openai_error(resp: requests.Response, status: int, *, code=None,
                        type_=None) -> dict:
    """Checks an error response: the status and OpenAI's {"error": {message, type, param,
    code}} shape. Returns the inner error object."""
    assert resp.status_code == status, (
        f"expected HTTP {status}, got {resp.status_code}: {resp.text[:500]}")
    assert resp.headers.get("Content-Type", "").startswith("application/json"), resp.headers
    body = resp.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert {"message", "type", "param", "code"} <= set(err), err
    assert isinstance(err["message"], str) and err["message"], err
    assert isinstance(err["type"], str) and err["type"], err
    assert err["param"] is None or isinstance(err["param"], str), err
    if code is not None:
        assert err["code"] == code, err
    if type_ is not None:
        assert err["type"] == type_, err
    return err


class Metrics:
    """A parsed /metrics scrape. get(name, **labels) sums the samples named `name` (full sample
    name, e.g. "tokamak:generation_tokens_total") whose labels include `labels`; 0 if none."""

    def __init__(self, text: str):
        self.text = text
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples = [s for f in self.families.values() for s in f.samples]

    def get(self, name: str, **labels) -> float:
        total = 0.0
        for s in self.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
        return total

    def has(self, name: str, **labels) -> bool:
        return any(s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
                   for s in self.samples)


class RawStream:
    """One HTTP request on its own connection, with the response read line by line, so a test
    can read a few SSE events and then drop the connection (abort()) like a client that went
    away. Not for concurrency inside one object."""

    def __init__(self, server: RunningServer, path: str, body, method: str = "POST",
                 headers: dict | None = None, timeout: float = 60, read_head: bool = True):
        """Sends the request; with read_head, also waits for the response's status and headers
        (else call read_head() later, e.g. from another thread)."""
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        self.conn.request(method, path, body=data, headers=hdrs)
        self.sock = self.conn.sock  # kept: getresponse() may drop conn.sock
        self.resp = None
        self.status = None
        self.headers = None
        if read_head:
            self.read_head()

    def read_head(self) -> int:
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = self.resp.headers
        return self.status

    def events(self):
        """SSE `data:` payloads as they arrive (strings; "[DONE]" included), until EOF."""
        data: list[str] = []
        while True:
            line = self.resp.readline()
            if not line:
                if data:
                    yield "\n".join(data)
                return
            line = line.decode("utf-8").rstrip("\r\n")
            if line == "":
                if data:
                    yield "\n".join(data)
                    data = []
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            # other SSE fields (comments, event:, id:) are ignored

    def read_body(self) -> bytes:
        return self.resp.read()

    def abort(self) -> None:
        """Drops the connection at once (a client that disconnects)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        try:
            if self.resp is not None:
                self.resp.close()
        finally:
            self.conn.close()
            self.sock.close()


def sse_json_events(stream: RawStream) -> tuple[list[dict], bool]:
    """Reads a whole SSE stream: (the JSON events, whether it ended with [DONE]).
    Nothing may follow [DONE]."""
    events, done = [], False
    for payload in stream.events():
        assert not done, f"event after [DONE]: {payload!r}"
        if payload == "[DONE]":
            done = True
        else:
            events.append(json.loads(payload))
    return events, done
