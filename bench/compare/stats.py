"""Medians, spreads and the side-by-side tables of bench/compare.sh.

A "sample" is one measured figure of one run; samples of the same (section, row, metric,
server) are collected over the repeats and shown as median (min-max), with the ratio of the
medians tokamak / llama.cpp.
"""
import json
import statistics
from collections import defaultdict

SERVERS = ("tokamak", "llama.cpp")

# (key in the table, label, what a better value is) for serving runs.
SERVE_METRICS = [
    ("output_tok_s", "output tok/s", "higher"),
    ("ttft_p50", "TTFT p50 (ms)", "lower"),
    ("ttft_p99", "TTFT p99 (ms)", "lower"),
    ("tpot_p50", "TPOT p50 (ms)", "lower"),
    ("tpot_p99", "TPOT p99 (ms)", "lower"),
]
# The machine's 1-minute load average when a run started: both servers should see alike.
LOAD_METRIC = ("load", "load average at start", "context")
OFFLINE_METRICS = [
    ("prefill_tok_s", "prefill tok/s (512-token prompt)", "higher"),
    ("decode_tok_s", "decode tok/s (128 tokens after 512)", "higher"),
]


def load_runs(path):
    """The run objects of a `tokamak bench serve --json` file: one run, a list of runs, or
    an object holding them under "runs"."""
    with open(path) as f:
        doc = json.load(f)
    if isinstance(doc, list):
        return doc
    if "runs" in doc:
        return doc["runs"]
    return [doc]


def serve_figures(run):
    """The figures the tables show, from one run object of `tokamak bench serve`."""
    def pct(key, p):
        s = run.get(key) or {}
        return s.get(p)
    return {
        "output_tok_s": run.get("output_tokens_per_s"),
        "ttft_p50": pct("ttft_ms", "p50"),
        "ttft_p99": pct("ttft_ms", "p99"),
        "tpot_p50": pct("tpot_ms", "p50"),
        "tpot_p99": pct("tpot_ms", "p99"),
        "completed": run.get("completed"),
        "failed": run.get("failed"),
    }


class Samples:
    def __init__(self):
        # (section, row) -> metric -> server -> [values]
        self.data = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        self.rows = []  # (section, row) in first-seen order

    def add(self, section, row, server, figures):
        if (section, row) not in self.rows:
            self.rows.append((section, row))
        for k, v in figures.items():
            if v is not None:
                self.data[(section, row)][k][server].append(v)

    def to_json(self):
        return [{"section": s, "row": r,
                 "samples": {k: dict(v) for k, v in self.data[(s, r)].items()}}
                for s, r in self.rows]


def _fmt(v):
    if v is None:
        return "-"
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def _cell(values):
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return _fmt(med)
    return f"{_fmt(med)} ({_fmt(min(values))}-{_fmt(max(values))})"


def _ratio(a, b):
    if not a or not b:
        return "-"
    mb = statistics.median(b)
    return f"{statistics.median(a) / mb:.2f}" if mb else "-"


def detailed_table(samples, section, metrics):
    """Markdown: one line per (row, metric): medians (min-max) of both and the ratio."""
    out = [f"| {section} | metric | tokamak | llama.cpp | tokamak / llama.cpp |",
           "|---|---|---|---|---|"]
    for (s, row) in samples.rows:
        if s != section:
            continue
        d = samples.data[(s, row)]
        for key, label, better in metrics:
            t, l = d[key]["tokamak"], d[key]["llama.cpp"]
            if not t and not l:
                continue
            if better == "context":
                out.append(f"| {row} | {label} | {_cell(t)} | {_cell(l)} | |")
                continue
            out.append(f"| {row} | {label} ({better} is better) | {_cell(t)} | {_cell(l)} | "
                       f"{_ratio(t, l)} |")
    return "\n".join(out)


def ratio_table(samples, section, metrics):
    """Markdown: one line per row, one column per metric, the ratio of medians."""
    head = "| " + section + " | " + " | ".join(f"{label}" for _, label, _ in metrics) + " |"
    out = [head, "|---" * (len(metrics) + 1) + "|"]
    for (s, row) in samples.rows:
        if s != section:
            continue
        d = samples.data[(s, row)]
        cells = [_ratio(d[key]["tokamak"], d[key]["llama.cpp"]) for key, _, _ in metrics]
        out.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def per_repeat_table(samples, section, metrics):
    """Markdown: the ratio tokamak / llama.cpp of each repeat (the two runs of a repeat are
    back to back), with the larger load average at their start: on a shared machine this
    shows how much of a ratio comes from other load."""
    n = max((len(v) for (s, _) in samples.rows if s == section
             for v in samples.data[(s, _)]["load"].values()), default=0)
    if n == 0:
        return ""
    out = ["| " + section + " | metric | " + " | ".join(f"repeat {i + 1}" for i in range(n))
           + " |", "|---|---|" + "---|" * n]
    for (s, row) in samples.rows:
        if s != section:
            continue
        d = samples.data[(s, row)]
        loads = [max(x) for x in zip(d["load"]["tokamak"], d["load"]["llama.cpp"])]
        for key, label, _ in metrics:
            t, l = d[key]["tokamak"], d[key]["llama.cpp"]
            cells = [f"{a / b:.2f} (load {ld:.1f})" if b else "-"
                     for a, b, ld in zip(t, l, loads)]
            out.append(f"| {row} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)
