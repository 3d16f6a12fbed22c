#!/usr/bin/env python3
"""English text for `tokamak perplexity`, from what every CPython install ships.

Source: `pydoc_data/topics.py` of the running Python's standard library: the `topics` dict
that `help("TOPIC")` reads, plain-text renderings of the sections of the Python Language
Reference and Library Reference (~465K characters, ~100K tokens for SmolLM2 on Python 3.11).
It is present on a fresh Debian 12 (package libpython3.11-stdlib, pulled in by python3).

License: the Python documentation, Copyright (c) 2001 Python Software Foundation, under the
PSF License Agreement (https://docs.python.org/3/license.html). The text is generated on
demand and never committed.

The topics are written in sorted key order, each as its text with trailing whitespace
removed, separated by one blank line. The text differs between Python versions, and so does
a perplexity measured on it: the script prints the Python version, the size and the SHA-256
of what it wrote, so that two measurements can be checked to be on the same text.

Usage: python3 scripts/perplexity_text.py OUT.txt
       build/tokamak perplexity -f OUT.txt --ctx 512 --max-tokens 20000
"""

import argparse
import hashlib
import platform
import sys

from pydoc_data.topics import topics


def topics_text() -> str:
    return "\n\n".join(topics[key].rstrip() for key in sorted(topics)) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="path of the text file to write")
    args = parser.parse_args()
    data = topics_text().encode("utf-8")
    with open(args.out, "wb") as f:
        f.write(data)
    print(
        f"{args.out}: {len(topics)} topics, {len(data)} bytes, sha256 "
        f"{hashlib.sha256(data).hexdigest()} (Python {platform.python_version()})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
