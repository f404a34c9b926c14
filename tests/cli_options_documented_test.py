#!/usr/bin/python3
"""Every option of `kvpool replay --help` and `kvpool trace-gen --help` is
named in docs/replay.md, every one of `kvpool bench master-envelope
--help` in docs/master_envelope.md and of `kvpool bench failover --help` in
docs/results/ha/failover-at-n.md, so a new knob cannot ship undocumented.

    tests/cli_options_documented_test.py --kvpool build/bin/kvpool
"""

import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.join(HERE, "..", "docs")
# (command words, the doc that must name each of its options)
COMMANDS = [
    (["replay"], "replay.md"),
    (["trace-gen"], "replay.md"),
    (["bench", "master-envelope"], "master_envelope.md"),
    (["bench", "failover"], os.path.join("results", "ha", "failover-at-n.md")),
]


def options_of(kvpool, sub):
    out = subprocess.run([kvpool, *sub, "--help"], capture_output=True,
                         text=True, check=True).stdout
    # CLI11 lists "  --name TYPE ..." and "  -h,--help ..."; the help flag
    # and a subcommand's own name are not options to document.
    opts = set(re.findall(r"(?:^|[\s,])(--[a-z][a-z0-9_-]*)", out))
    opts.discard("--help")
    return opts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvpool", required=True)
    a = ap.parse_args()
    missing = []
    for sub, doc_name in COMMANDS:
        with open(os.path.join(DOCS, doc_name)) as f:
            doc = f.read()
        opts = options_of(a.kvpool, sub)
        name = " ".join(sub)
        if len(opts) < 5:
            print(f"FAIL: `kvpool {name} --help` listed only {sorted(opts)}")
            return 1
        for o in sorted(opts):
            # Named as `--opt` (word-bounded), alone or with a value.
            if not re.search(re.escape(o) + r"(?![a-z0-9_-])", doc):
                missing.append(f"kvpool {name} {o} (docs/{doc_name})")
    if missing:
        print("FAIL: options not documented:\n  " + "\n  ".join(missing))
        return 1
    print("ok: every option of kvpool replay, trace-gen, bench "
          "master-envelope and bench failover is documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
