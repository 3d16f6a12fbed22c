"""Start, health-check and stop the servers that bench/compare.sh and bench/crosscheck.sh
measure: `tokamak serve` and llama.cpp's `llama-server`, each as a child process with its
log in a file. Every server started here is stopped by stop() or, at the latest, by
stop_all() (registered with atexit and on SIGINT/SIGTERM), so no run leaves one behind.
"""
import atexit
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

_RUNNING = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name, argv, port, log_path, env=None):
        self.name = name
        self.argv = argv
        self.env = env  # None: this process's environment
        self.port = port
        self.log_path = log_path
        self.proc = None
        self.started_at = None  # time.monotonic() at the spawn, and once /health said 200
        self.ready_at = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s=300, poll_s=0.25):
        """Starts the server and waits until GET /health answers 200, asking every poll_s
        seconds; started_at and ready_at say when it was spawned and found ready."""
        self._log = open(self.log_path, "w")
        self._log.write("$ " + " ".join(self.argv) + "\n")
        self._log.flush()
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     env=self.env)
        _RUNNING.append(self)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} while "
                                   f"starting; see {self.log_path}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        self.ready_at = time.monotonic()
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(poll_s)
        self.stop()
        raise RuntimeError(f"{self.name} not healthy after {timeout_s} s; see {self.log_path}")

    def cpu_seconds(self):
        """User + system CPU time the server process has used so far (from /proc)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if self in _RUNNING:
            _RUNNING.remove(self)
        self.proc = None


def stop_all():
    for s in list(_RUNNING):
        s.stop()


def _on_signal(signum, _frame):
    stop_all()
    raise SystemExit(128 + signum)


atexit.register(stop_all)
signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)


def tokamak_server(binary, model, threads, max_seqs, ctx_per_seq, name, log_path,
                   extra=()):
    """tokamak serve with max_seqs sequences of ctx_per_seq tokens and a KV pool of exactly
    max_seqs x ctx_per_seq tokens, the same capacity llama-server gets below."""
    port = free_port()
    argv = [binary, "serve", "-m", model, "-t", str(threads), "--host", "127.0.0.1",
            "--port", str(port), "--served-model-name", name, "--max-seqs", str(max_seqs),
            "--max-model-len", str(ctx_per_seq), "--kv-tokens", str(max_seqs * ctx_per_seq),
            *extra]
    return Server("tokamak", argv, port, log_path)


def llama_server(binary, model, threads, parallel, ctx_per_seq, name, log_path, extra=(),
                 env=None):
    """llama-server with `parallel` slots of ctx_per_seq tokens each (-c is the total,
    split evenly between slots when the KV cache is not unified) and continuous batching."""
    port = free_port()
    argv = [binary, "-m", model, "-t", str(threads), "-tb", str(threads), "--host",
            "127.0.0.1", "--port", str(port), "--alias", name, "-np", str(parallel),
            "-c", str(parallel * ctx_per_seq), "--no-kv-unified", "-cb", *extra]
    return Server("llama.cpp", argv, port, log_path, env)
