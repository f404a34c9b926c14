#!/usr/bin/env python3
"""Fails on an #include that goes against the layer order of src/.

The order is the table of the "Layers" section of docs/architecture.md (read
from there, so the documented order is the checked one). Every
`#include "..."` line of src/** and include/kvpool/* is checked:

  - a file may include headers of its own folder and of lower layers;
  - folders in one layer are peers and do not include each other;
  - nothing in src/ or include/ includes tools/, bench/, python/, fuzz/ or
    tests/, except that test sources may include the helpers in tests/.

Prints each offending file:line with the rule it breaks and exits 1; exits 0
when every include is in order, 2 when the table cannot be read. Standard
library only, and it reads sources only: ctest runs it as layering_check.
"""

import argparse
import os
import re
import sys

ARCHITECTURE = os.path.join("docs", "architecture.md")
ADD_ROW = f"add it to the table in {ARCHITECTURE}"
# Above every layer, outside src/: they may include src/, never the reverse.
ABOVE = ("tools", "bench", "python", "fuzz", "tests")
SOURCE_EXTS = (".h", ".cc", ".c")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# Test sources in src/ may use the shared test helpers under tests/.
TEST_SOURCE_RE = re.compile(
    r"(_test\.(cc|c|h)|_test_.*\.h|^test_.*\.h|_bench\.cc)$")
# One folder of a table row, with its public headers in parentheses:
# `client` (`kvpool/client.h`, `kvpool/options.h`).
FOLDER_RE = re.compile(r"`(\w+)`(?:\s*\(([^)]*)\))?")


class Layers:
    """Folders of src/ and public headers of include/kvpool/, by layer."""

    def __init__(self):
        self.folder = {}  # "client" -> 3
        self.public = {}  # "client.h" -> "client" (the folder implementing it)


def read_layers(root):
    """Parses the table under "## Layers" in docs/architecture.md: rows
    | <layer number> | <folders, each with its public headers> | ... |."""
    path = os.path.join(root, ARCHITECTURE)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## Layers\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not m:
        raise ValueError(f"{ARCHITECTURE}: no '## Layers' section")
    layers = Layers()
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        found = FOLDER_RE.findall(cells[1])
        if not found:
            raise ValueError(f"{ARCHITECTURE}: layer {cells[0]} names no folder")
        for folder, headers in found:
            layers.folder[folder] = int(cells[0])
            for h in re.findall(r"`kvpool/([^`]+)`", headers):
                layers.public[h] = folder
    if not layers.folder:
        raise ValueError(f"{ARCHITECTURE}: the Layers table has no rows")
    return layers


def is_test_source(path):
    return bool(TEST_SOURCE_RE.search(os.path.basename(path)))


def sources(root):
    """The path, relative to the root, of every file to check."""
    for top in ("src", os.path.join("include", "kvpool")):
        for dirpath, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_EXTS):
                    rel = os.path.relpath(os.path.join(dirpath, name), root)
                    yield rel


def folder_of(rel, layers):
    """The layer folder a file is in: src/<folder>/..., or the folder that
    implements an include/kvpool/ header."""
    parts = rel.split(os.sep)
    if parts[0] == "src":
        return parts[1] if len(parts) > 2 else None
    return layers.public.get(parts[-1])


def target_of(inc, rel, root, layers):
    """(folder, None) for an include in the layer table, (None, reason) for
    one that is not allowed whatever the layer, ("", None) for headers of no
    layer that anyone may include."""
    parts = inc.split("/")
    if len(parts) == 1:
        if inc.endswith(".pb.h"):
            return "", None  # generated from proto/: depends on nothing of ours
        if os.path.exists(os.path.join(root, os.path.dirname(rel), inc)):
            return folder_of(rel, layers), None
        return None, "a header of no known root (name it from src/ or include/)"
    if parts[0] == "kvpool" and len(parts) == 2:
        owner = layers.public.get(parts[1])
        if owner is None:
            return None, f"include/kvpool/{parts[1]} is in no layer of {ARCHITECTURE}"
        return owner, None
    if parts[0] in layers.folder:
        return parts[0], None
    if parts[0] in ABOVE:
        if parts[0] == "tests" and is_test_source(rel):
            return "", None
        return None, f"{parts[0]}/ is above every layer: src/ never includes it"
    return None, f"{parts[0]}/ is in no layer of {ARCHITECTURE}"


def check(root, layers):
    errors = []
    src = os.path.join(root, "src")
    for name in sorted(os.listdir(src)):
        if os.path.isdir(os.path.join(src, name)) and name not in layers.folder:
            errors.append(f"src/{name}/: in no layer; {ADD_ROW}")
    pub = os.path.join(root, "include", "kvpool")
    for name in sorted(os.listdir(pub)):
        if name.endswith(".h") and name not in layers.public:
            errors.append(f"include/kvpool/{name}: in no layer; {ADD_ROW}")
    files = includes = 0
    for rel in sources(root):
        files += 1
        own = folder_of(rel, layers)
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                includes += 1
                inc = m.group(1)
                target, reason = target_of(inc, rel, root, layers)
                where = f'{rel}:{lineno}: includes "{inc}": '
                if reason:
                    errors.append(where + reason)
                    continue
                # own not in the table: the folder is reported above.
                if not target or target == own or own not in layers.folder:
                    continue
                a, b = layers.folder[own], layers.folder[target]
                if b == a:
                    errors.append(
                        where + f"{own} and {target} are peers in layer {a}: "
                        "they do not include each other (move what they share "
                        "down a layer)")
                elif b > a:
                    errors.append(
                        where + f"{own} (layer {a}) may not include {target} "
                        f"(layer {b}): includes go down the layers only")
    return files, includes, errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        help="repository root (default: this script's parent folder)")
    args = parser.parse_args()
    try:
        layers = read_layers(args.root)
    except (OSError, ValueError) as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2
    files, includes, errors = check(args.root, layers)
    for e in errors:
        print(e)
    order = {}
    for folder, layer in layers.folder.items():
        order.setdefault(layer, []).append(folder)
    print("layers: " + " <- ".join("/".join(order[k]) for k in sorted(order)))
    print(f"check_layers: {files} files, {includes} includes, "
          f"{len(errors)} against the layer order")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
