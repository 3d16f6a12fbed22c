#!/usr/bin/env python3
"""Checks a Prometheus text exposition (format 0.0.4), such as tokamak's GET /metrics.

usage: python3 tests/integration/check_prometheus_text.py FILE [--model-name NAME]
       (FILE "-": stdin)

Parses FILE with prometheus_client's parser and exits 1, saying why, when:
- the parser fails;
- a sample's family had no matching "# TYPE" line (the parser types it "unknown"; for a
  counter in this format the TYPE line must name the sample, "_total" included);
- a sample lacks the model_name label (or, with --model-name, has another value);
- a histogram's buckets are not cumulative, lack le="+Inf", or its _count differs from it.
Prints the families found when all is well. Importable: check(text, model_name=None)
returns (problems, families).
"""

import argparse
import math
import sys
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families


def check(text, model_name=None):
    problems = []
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError and friends
        return [f"parse error: {e!r}"], []
    for family in families:
        if family.type in ("unknown", "untyped"):
            problems.append(f"{family.name}: no matching # TYPE line")
        for s in family.samples:
            if "model_name" not in s.labels:
                problems.append(f"{s.name}{s.labels}: no model_name label")
            elif model_name is not None and s.labels["model_name"] != model_name:
                problems.append(f"{s.name}{s.labels}: model_name is not {model_name!r}")
        if family.type == "histogram":
            problems += check_histogram(family)
    return problems, families


def check_histogram(family):
    problems = []
    series = defaultdict(lambda: {"buckets": [], "count": None})
    for s in family.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        if s.name.endswith("_bucket"):
            series[key]["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_count"):
            series[key]["count"] = s.value
    for key, h in series.items():
        buckets = sorted(h["buckets"])
        values = [v for _, v in buckets]
        if not buckets or not math.isinf(buckets[-1][0]):
            problems.append(f"{family.name}{dict(key)}: no le=\"+Inf\" bucket")
            continue
        if any(b < a for a, b in zip(values, values[1:])):
            problems.append(f"{family.name}{dict(key)}: buckets not cumulative")
        if h["count"] != values[-1]:
            problems.append(f"{family.name}{dict(key)}: _count {h['count']} != +Inf {values[-1]}")
    return problems


def main():
    parser = argparse.ArgumentParser(description="Checks a Prometheus text exposition.")
    parser.add_argument("file", help='the exposition; "-" reads stdin')
    parser.add_argument("--model-name", help="the model_name every sample must carry")
    args = parser.parse_args()
    with (sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")) as f:
        text = f.read()
    problems, families = check(text, args.model_name)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    for f in families:
        print(f"{f.type:9} {f.name} ({len(f.samples)} samples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
