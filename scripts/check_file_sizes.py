#!/usr/bin/env python3
"""Fails on a source file of src/ longer than the limit (issue #18).

Every `.cc` and `.h` under src/ may have at most MAX_LINES lines, except
test sources (`*_test.cc`, `*_test.h`, `*_test_*.h`, `test_*.h`) and the
files of ALLOWLIST, each with the reason it may be longer for now. A file
past the limit is split by concern into files named for what they hold (as
MasterService is: master_service.cc, master_put.cc, ...), not allowlisted.

Prints each offending file with its line count and exits 1; exits 0 when
every file is within the limit. An allowlisted file that is back within the
limit is reported so that its entry can go, without failing. Standard
library only, and it reads sources only: ctest runs it as file_size_check.
"""

import argparse
import os
import re
import sys

MAX_LINES = 900
SOURCE_EXTS = (".cc", ".h")
TEST_SOURCE_RE = re.compile(r"(_test\.(cc|h)|_test_.*\.h|^test_.*\.h)$")

# Path (from the repository root) -> why it may exceed MAX_LINES for now.
ALLOWLIST = {}


def line_count(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return sum(1 for _ in f)


def check(root):
    """Returns (files checked, [(path, lines)] over the limit and not
    allowlisted, [(path, lines)] allowlisted and within the limit)."""
    checked, over, stale = 0, [], []
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "src")):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(SOURCE_EXTS) or TEST_SOURCE_RE.search(name):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            n = line_count(path)
            checked += 1
            if rel in ALLOWLIST:
                if n <= MAX_LINES:
                    stale.append((rel, n))
            elif n > MAX_LINES:
                over.append((rel, n))
    return checked, over, stale


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        help="repository root (default: this script's parent folder)")
    args = parser.parse_args()
    checked, over, stale = check(args.root)
    for rel, n in over:
        print(f"{rel}: {n} lines, more than {MAX_LINES}: split it by concern "
              "(see scripts/check_file_sizes.py)")
    for rel, n in stale:
        print(f"note: {rel} is allowlisted but has {n} lines, within the "
              "limit: remove its ALLOWLIST entry")
    stale_paths = {rel for rel, _ in stale}
    for rel, reason in sorted(ALLOWLIST.items()):
        if not os.path.isfile(os.path.join(args.root, rel)):
            print(f"note: allowlisted {rel} does not exist: remove its entry")
        elif rel not in stale_paths:
            print(f"allowed over the limit: {rel} ({reason})")
    print(f"check_file_sizes: {checked} files, {len(over)} over {MAX_LINES} "
          "lines")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
