#!/usr/bin/env python3
"""Fails when a copy of a knob disagrees with its one declaration.

A knob is declared once, as a field with its default in the configuration
struct of its process: MasterConfig (src/master/master_config.h), NodeConfig
(src/node/node_config.h), ClientConfig (include/kvpool/options.h). This
script reads those headers and checks every copy against them:

  (a) flags: each MasterConfig / NodeConfig field is a flag of the same name
      of kvpool-master / kvpool-node, bound to that field, with the same
      default in `--help`; every other flag is in TOOL_ONLY_FLAGS below;
  (b) config-file keys: the tools read `--config` through CLI11, whose keys
      are the flag names, so (a) covers them; checked: set_config is there;
  (c) LocalClusterOptions (include/kvpool/local_cluster.h): each field has
      the name and default of a MasterConfig/NodeConfig field, or is in
      ALIASES (another name, same default), OVERRIDES (a default a cluster
      inside one process needs, with the reason) or CLUSTER_ONLY; and
      src/cluster/local_cluster.cc copies it into that field;
  (d) the Python LocalCluster (python/src/py_store.cc, python/kvpool/
      _kvpool.pyi): keyword names and defaults are LocalClusterOptions';
  (e) docs/configuration.md: the MasterConfig, NodeConfig and ClientConfig
      tables list every field with its default, and nothing else but
      tool-only flags;
  (f) MasterConfig::ToString prints every field (master_config.cc);
  (g) the Python Store (python/src/py_store.cc, _kvpool.pyi): each keyword
      is a ClientConfig field, its default is read from a ClientConfig
      object (`cdefaults.<field>`), it is copied into the config, and the
      stub says the same default;
  (h) the master's policies (POLICY_OPTIONS below): each field of their
      `struct Options` (the knobs a policy reads, filled by FromConfig) is a
      MasterConfig field of the same name and default.

Prints every disagreement and exits 1; exits 0 when all agree. With
--bin-dir (where kvpool-master and kvpool-node are) it also runs their
`--help`; without it, (a) reads the flag definitions from the sources only.
Standard library only: ctest runs it as knob_consistency.
"""

import argparse
import ast
import os
import re
import subprocess
import sys

MASTER_H = "src/master/master_config.h"
MASTER_CC = "src/master/master_config.cc"
NODE_H = "src/node/node_config.h"
CLIENT_H = "include/kvpool/options.h"
CLUSTER_H = "include/kvpool/local_cluster.h"
CLUSTER_CC = "src/cluster/local_cluster.cc"
PY_STORE = "python/src/py_store.cc"
PY_STUB = "python/kvpool/_kvpool.pyi"
DOC = "docs/configuration.md"
MASTER_TOOL = "tools/kvpool_master.cc"
NODE_TOOL = "tools/kvpool_node.cc"
FLAGS_H = "tools/flags.h"

# Fields with no flag: they exist for tests only (docs/configuration.md
# says so in their rows).
NO_FLAG = {
    "MasterConfig": {
        "emulate_pre_prefetch_master":
        "test-only: answer as a master without the prefetch RPCs",
    },
    "NodeConfig": {
        "emulate_pre_prefetch_holder":
        "test-only: serve as a holder without PREFETCH",
    },
}

# Flags of a tool that are not fields of its struct.
TOOL_ONLY_FLAGS = {
    "kvpool-master": {
        "help": "CLI11",
        "config": "the config file itself",
        "port_file": "where to write the bound port, for scripts",
    },
    "kvpool-node": {
        "help": "CLI11",
        "config": "the config file itself",
        "etcd_endpoints": "EtcdFlags: rewrites master_server_address",
        "cluster_id": "EtcdFlags: rewrites master_server_address",
    },
}

# LocalClusterOptions fields named differently from the field they set
# (their names are public API and stay): same default as the target.
ALIASES = {
    "segment_size": ("NodeConfig", "global_segment_size"),
    "enable_ssd": ("NodeConfig", "enable_ssd_offload"),
    "ssd_root": ("NodeConfig", "ssd_offload_path"),
    "prefetch_buffer_size": ("NodeConfig", "prefetch_buffer_segment"),
}

# LocalClusterOptions fields whose default must differ from their target's,
# and why.
OVERRIDES = {
    "master_port": (
        "MasterConfig", "rpc_port",
        "0: a cluster in a test process takes a free port, so several "
        "clusters (and a running kvpool-master) can coexist"),
    "metrics_port": (
        "MasterConfig", "metrics_port",
        "-1: no HTTP port unless a test asks, for the same reason"),
}

# LocalClusterOptions fields that are no process's knob.
CLUSTER_ONLY = {
    "num_nodes": "how many nodes the cluster starts",
    "node_id_prefix": "node i gets NodeConfig::node_id <prefix><i>",
}

# Doc defaults given in words for a struct default that is empty.
DOC_WORDS = {
    ("NodeConfig", "node_id"): "generated",
    ("MasterConfig", "ha_advertise_host"): "rpc_address",
}

SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

errors = []


def err(msg):
    errors.append(msg)


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def eval_cxx(expr):
    """The value of a C++ default: int, float, bool, str or the text."""
    e = " ".join(expr.split())
    if e in ("true", "false"):
        return e == "true"
    m = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', e)
    if m:
        return ast.literal_eval('"' + m.group(1) + '"')
    # int64_t{1} << 20, 4ull << 30, 30 * 60 * 1000, 0.90
    n = re.sub(r"\b(?:u?int\d+_t|size_t|unsigned|int|long)\{([^}]*)\}", r"(\1)", e)
    n = re.sub(r"(\d)(?:ull|ULL|ll|LL|ul|UL|u|U|l|L)\b", r"\1", n)
    if re.fullmatch(r"[\d\s.()+\-*/<>]+", n):
        try:
            return eval(n, {"__builtins__": {}})  # digits and operators only
        except (SyntaxError, ZeroDivisionError):
            pass
    return e


def parse_value(text, like):
    """Text from --help, a doc or Python, read as the type of `like`."""
    t = text.strip().strip("`").strip()
    if isinstance(like, bool):
        low = t.lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0"):
            return False
        return t
    if isinstance(like, (int, float)):
        m = re.fullmatch(r"(-?[\d.]+)\s*([A-Za-z]*)", t.replace("_", ""))
        if m and m.group(2).lower() in SIZE_UNITS:
            v = float(m.group(1)) * SIZE_UNITS[m.group(2).lower()]
            return int(v) if v == int(v) else v
        v = eval_cxx(t)
        return v
    if t in ("—", "-", '""', "''", ""):
        return ""
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        return t[1:-1]
    return t


def same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-12 * max(1, abs(a), abs(b))
    return a == b


FIELD_RE = re.compile(
    r"^(?P<type>(?:[\w:]+(?:<[^;{}]*>)?\s+)+?)(?P<name>\w+)"
    r"\s*(?:=\s*(?P<init>.+)|\{(?P<brace>[^}]*)\})?$", re.S)


def struct_fields(text, struct):
    """[(name, default)] of `struct X { ... };` in declaration order."""
    text = strip_comments(text)  # no brace of a comment is counted
    m = re.search(r"\bstruct\s+%s\s*\{" % struct, text)
    if not m:
        err(f"cannot find struct {struct}")
        return []
    depth, i = 1, m.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    body = text[m.end():i - 1]
    fields = []
    for stmt in body.split(";"):
        s = " ".join(stmt.split())
        if not s or "(" in s.split("=")[0] or s.startswith(("using ", "static ")):
            continue
        fm = FIELD_RE.match(s)
        if not fm:
            continue
        ctype = fm.group("type").strip()
        init = fm.group("init") or fm.group("brace")
        if init is None or init.strip() == "":
            if "string" in ctype:
                val = ""
            elif ctype == "bool":
                val = False
            else:
                val = 0
        else:
            val = eval_cxx(init)
        fields.append((fm.group("name"), val))
    return fields


# ---- (a), (b): flags ---------------------------------------------------

FLAG_DEF_RE = re.compile(
    r'(?:add_option|add_flag)\("--(\w+)", c\.(\w+)'
    r'|AddSizeFlag\(app, "--(\w+)", &c\.(\w+)')


def source_flags(root, tool_src, shared):
    """{flag: field} of `app.add_option("--x", c.y ...)` in a tool's source
    (and the shared helpers it calls, `c->y`)."""
    text = read(root, tool_src)
    flat = re.sub(r"\s+", " ", text).replace("( ", "(")
    found = {}
    for m in FLAG_DEF_RE.finditer(flat):
        g = [x for x in m.groups() if x]
        found[g[0]] = g[1]
    if "AddMasterSecurityFlags(app, &c)" in text:
        for m in re.finditer(r'add_option\("--(\w+)",\s*c->(\w+)', shared):
            found[m.group(1)] = m.group(2)
    if 'set_config("--config"' not in text:
        err(f"{tool_src}: no app.set_config(\"--config\"...): the config file "
            "keys are no longer the flag names (b)")
    return found


def help_flags(binary):
    """{flag: default text or None} from `binary --help`. CLI11 prints
    `--name TYPE=default` (TYPE may carry a check: `INT:INT in [1 - 9]`);
    AddSizeFlag puts "default 64MiB)" in the help text."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True,
                         timeout=30).stdout
    flags = {}
    for e in re.split(r"\n(?=\s*(?:-\w,)?--\w)", out):
        m = re.match(r"\s*(?:-\w,)?--(\w+)", e)
        if not m:
            continue
        d = re.match(r"\s*(?:-\w,)?--\w+ [A-Z]+(?::[^=\n]*)?=(\S*)", e)
        size = re.search(r"\(bytes;[^)]*default ([\w.]+)\)",
                         " ".join(e.split()))
        flags[m.group(1)] = (size.group(1) if size else
                             d.group(1) if d else None)
    return flags


def check_tool(root, tool, src, struct, fields, bin_dir, shared):
    defaults = dict(fields)
    bound = source_flags(root, src, shared)
    exempt = NO_FLAG.get(struct, {})
    only = TOOL_ONLY_FLAGS[tool]
    for flag, field in bound.items():
        if flag in only:
            continue
        if field != flag:
            err(f"{src}: --{flag} sets {struct}::{field}: a flag has its "
                "field's name (a)")
        elif field not in defaults:
            err(f"{src}: --{flag} is no field of {struct}; add the field, or "
                f"list the flag in TOOL_ONLY_FLAGS of {sys.argv[0]} (a)")
    for name, _ in fields:
        if name in exempt:
            if name in bound:
                err(f"{struct}::{name} has a flag now: drop it from NO_FLAG")
            continue
        if name not in bound:
            err(f"{struct}::{name} has no --{name} in {src} (a)")
    if not bin_dir:
        return
    binary = os.path.join(bin_dir, tool)
    if not os.access(binary, os.X_OK):
        err(f"{binary}: not built; cannot read its --help (a)")
        return
    shown = help_flags(binary)
    for flag, dtext in shown.items():
        if flag in only:
            continue
        if flag not in defaults:
            err(f"{tool} --help: --{flag} is no field of {struct} and not in "
                "TOOL_ONLY_FLAGS (a)")
            continue
        want = defaults[flag]
        if dtext is None:
            # No default shown: flags (false) and strings left empty.
            if not (want is False or want == ""):
                err(f"{tool} --help: --{flag} shows no default; "
                    f"{struct}::{flag} = {repr(want)} (capture_default_str) (a)")
            continue
        got = parse_value(dtext, want)
        if not same(got, want):
            err(f"{tool} --help: --{flag} default {dtext!r} != "
                f"{struct}::{flag} = {repr(want)} (a)")
    for name, _ in fields:
        if name not in exempt and name not in shown:
            err(f"{tool} --help has no --{name} ({struct}) (a)")


# ---- (c): LocalClusterOptions -------------------------------------------

ASSIGN_RE = re.compile(r"\b(mc|nc)\.(\w+)\s*=\s*([^;]*);")


def check_cluster(root, master, node, cluster):
    structs = {"MasterConfig": dict(master), "NodeConfig": dict(node)}
    cc = strip_comments(read(root, CLUSTER_CC))
    copies = {}  # option -> {(struct, field)}
    for m in ASSIGN_RE.finditer(cc):
        struct = "MasterConfig" if m.group(1) == "mc" else "NodeConfig"
        for opt in re.findall(r"options_\.(\w+)", m.group(3)):
            copies.setdefault(opt, set()).add((struct, m.group(2)))
    for name, val in cluster:
        if name in CLUSTER_ONLY:
            if f"options_.{name}" not in cc:
                err(f"{CLUSTER_CC}: LocalClusterOptions::{name} is never "
                    "read (c)")
            continue
        if name in ALIASES or name in OVERRIDES:
            struct, field = (ALIASES.get(name) or OVERRIDES[name])[:2]
            targets = [(struct, field)]
        else:
            targets = [(s, name) for s in structs if name in structs[s]]
            if not targets:
                err(f"LocalClusterOptions::{name} is no field of MasterConfig "
                    "or NodeConfig: rename it, or list it in ALIASES, "
                    f"OVERRIDES or CLUSTER_ONLY of scripts/check_knobs.py (c)")
                continue
        for struct, field in targets:
            want = structs[struct].get(field)
            if field not in structs[struct]:
                err(f"{name}: its target {struct}::{field} does not exist (c)")
                continue
            if name in OVERRIDES:
                if same(val, want):
                    err(f"LocalClusterOptions::{name} now has {struct}::"
                        f"{field}'s default: drop it from OVERRIDES (c)")
            elif not same(val, want):
                err(f"LocalClusterOptions::{name} = {repr(val)} but "
                    f"{struct}::{field} = {repr(want)}: one default (c)")
            if (struct, field) not in copies.get(name, set()):
                err(f"{CLUSTER_CC}: LocalClusterOptions::{name} is not "
                    f"copied into {struct}::{field} (c)")


# ---- (d): the Python LocalCluster ---------------------------------------

def check_python(root, cluster):
    opts = dict(cluster)
    src = strip_comments(read(root, PY_STORE))
    m = re.search(r'm,\s*"LocalCluster"(.*?)\.def\(\s*"start"', src, re.S)
    if not m:
        err(f"{PY_STORE}: cannot find the LocalCluster constructor (d)")
        return
    block = m.group(1)
    args = re.findall(r'py::arg\("(\w+)"\)\s*=\s*([^,)]+(?:\([^)]*\))?[^,)]*)',
                      block)
    names = set()
    for name, expr in args:
        names.add(name)
        expr = expr.strip()
        if name not in opts:
            err(f"{PY_STORE}: LocalCluster({name}=...) is no field of "
                "LocalClusterOptions (d)")
            continue
        dm = re.fullmatch(r"[A-Za-z_]\w*\.(\w+)", expr)
        if dm:  # taken from a LocalClusterOptions object: must be its field
            if dm.group(1) != name:
                err(f"{PY_STORE}: {name}'s default is the field "
                    f"{dm.group(1)} (d)")
            continue
        got = eval_cxx(expr)
        if not same(got, opts[name]):
            err(f"{PY_STORE}: LocalCluster({name}={expr}) but "
                f"LocalClusterOptions::{name} = {repr(opts[name])} (d)")
    for name in names:
        if f"o.{name} = {name};" not in " ".join(block.split()):
            err(f"{PY_STORE}: {name} is not copied into LocalClusterOptions (d)")
    check_stub(root, "LocalCluster", names, opts, "LocalClusterOptions", "d")


def check_stub(root, cls, names, opts, struct, part, spell=lambda n, v: v):
    """The stub's `cls.__init__` has exactly `names` as keywords, each with
    the default `opts` gives it (`spell` turns a C++ value into Python's)."""
    stub = read(root, PY_STUB)
    sm = re.search(r"class %s:.*?def __init__\((.*?)\)\s*->" % cls, stub,
                   re.S)
    if not sm:
        err(f"{PY_STUB}: cannot find {cls}.__init__ ({part})")
        return
    stub_args = {}
    for am in re.finditer(r"(\w+)\s*:\s*\w+\s*=\s*([^,\n]+)", sm.group(1)):
        stub_args[am.group(1)] = am.group(2).strip()
    if set(stub_args) != set(names):
        err(f"{PY_STUB}: {cls} keywords {sorted(stub_args)} != "
            f"{PY_STORE}'s {sorted(names)} ({part})")
    for name, text in stub_args.items():
        if name not in opts:
            continue
        want = spell(name, opts[name])
        py = text.replace("True", "true").replace("False", "false")
        got = eval_cxx(py) if not py.startswith('"') else ast.literal_eval(text)
        if not same(got, want):
            err(f"{PY_STUB}: {cls}({name}={text}) but "
                f"{struct}::{name} = {repr(want)} ({part})")


# ---- (g): the Python Store and ClientConfig --------------------------------

# ClientConfig's enum fields and the Python spelling of their values.
PY_ENUMS = {"transport": {"TransportMode::kAuto": "auto",
                          "TransportMode::kShm": "shm",
                          "TransportMode::kTcp": "tcp"}}


def check_python_store(root, client):
    opts = dict(client)
    src = strip_comments(read(root, PY_STORE))
    m = re.search(r'm,\s*"Store"(.*?)\.def\(\s*"close"', src, re.S)
    if not m:
        err(f"{PY_STORE}: cannot find the Store constructor (g)")
        return
    block = " ".join(m.group(1).split())
    names = []
    for name, expr in re.findall(r'py::arg\("(\w+)"\)\s*=\s*(.+?)(?=, py::|, "|\s*$)',
                                 block):
        names.append(name)
        if name not in opts:
            err(f"{PY_STORE}: Store({name}=...) is no field of ClientConfig (g)")
            continue
        want = (rf"TransportName\(cdefaults\.{name}\)" if name in PY_ENUMS
                else rf"cdefaults\.{name}")
        if not re.fullmatch(want, expr.strip()):
            err(f"{PY_STORE}: Store({name}={expr.strip()}): the default must "
                f"be read from ClientConfig (cdefaults.{name}) (g)")
        if f"c.{name} = " not in block:
            err(f"{PY_STORE}: Store's {name} is not copied into ClientConfig (g)")
    if not names:
        err(f"{PY_STORE}: Store has no keyword arguments? (g)")
        return
    check_stub(root, "Store", names, opts, "ClientConfig", "g",
               lambda n, v: PY_ENUMS.get(n, {}).get(v, v))


# ---- (e): docs/configuration.md -----------------------------------------

def doc_tables(text):
    """{struct: {knob: default text}} of the tables under '## ... (`X`)'."""
    tables = {}
    current = None
    for line in text.splitlines():
        h = re.match(r"##\s.*\(`(\w+)`", line)
        if line.startswith("## "):
            current = h.group(1) if h else None
            if current:
                tables[current] = {}
            continue
        if not current or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = re.findall(r"`(\w+)`", cells[0])
        if not names or cells[0] == "knob":
            continue
        # ClientConfig's table has a "CLI flag" column before the default.
        dcell = cells[2] if current == "ClientConfig" else cells[1]
        parts = [p.strip() for p in dcell.split(",")]
        if len(parts) != len(names):
            parts = [dcell] * len(names)
        for n, p in zip(names, parts):
            tables[current][n] = p
    return tables


def check_docs(root, structs, tool_only):
    tables = doc_tables(read(root, DOC))
    for struct, fields in structs.items():
        rows = tables.get(struct)
        if rows is None:
            err(f"{DOC}: no '## ... (`{struct}`)' table (e)")
            continue
        names = {n for n, _ in fields}
        for name, want in fields:
            if name not in rows:
                err(f"{DOC}: the {struct} table has no `{name}` "
                    f"(default {repr(want)}) (e)")
                continue
            text = rows[name].strip("`")
            if DOC_WORDS.get((struct, name)) == text and want == "":
                continue
            if isinstance(want, str) and want.startswith("TransportMode::k"):
                want = want.split("::k")[1].lower()
            got = parse_value(text, want)
            if not same(got, want):
                err(f"{DOC}: `{name}` default {rows[name]} but {struct}::"
                    f"{name} = {repr(want)} (e)")
        for name in rows:
            if name not in names and name not in tool_only.get(struct, {}):
                err(f"{DOC}: the {struct} table lists `{name}`, which is no "
                    "field of it nor a tool-only flag (e)")


# ---- (h): the master policies' Options -------------------------------------

POLICY_OPTIONS = [
    "src/master/eviction_policy.h",
    "src/master/lease_policy.h",
    "src/master/offload_scheduler.h",
    "src/master/placement_policy.h",
    "src/master/promotion_scheduler.h",
]


def check_policy_options(root, master):
    defaults = dict(master)
    for rel in POLICY_OPTIONS:
        for name, val in struct_fields(read(root, rel), "Options"):
            if name not in defaults:
                err(f"(h) {rel}: Options::{name} is not a MasterConfig field")
            elif not same(val, defaults[name]):
                err(f"(h) {rel}: Options::{name} defaults to {val!r}, "
                    f"MasterConfig::{name} to {defaults[name]!r}")


# ---- (f): MasterConfig::ToString ----------------------------------------

def check_to_string(root, master):
    cc = read(root, MASTER_CC)
    m = re.search(r"MasterConfig::ToString\(\) const \{(.*?)\n\}", cc, re.S)
    if not m:
        err(f"{MASTER_CC}: cannot find MasterConfig::ToString (f)")
        return
    body = m.group(1)
    for name, _ in master:
        if not re.search(r"\b%s=|KVPOOL_ADD\(%s\)" % (name, name), body):
            err(f"{MASTER_CC}: MasterConfig::ToString does not print "
                f"{name}= (f)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(
        os.path.abspath(__file__)), ".."))
    ap.add_argument("--bin-dir", help="where kvpool-master and kvpool-node "
                    "are; their --help is then checked too")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    master = struct_fields(read(root, MASTER_H), "MasterConfig")
    node = struct_fields(read(root, NODE_H), "NodeConfig")
    client = struct_fields(read(root, CLIENT_H), "ClientConfig")
    cluster = struct_fields(read(root, CLUSTER_H), "LocalClusterOptions")
    if not (master and node and client and cluster):
        print("\n".join(errors) or "a struct has no fields", file=sys.stderr)
        return 2
    shared = read(root, FLAGS_H)
    check_tool(root, "kvpool-master", MASTER_TOOL, "MasterConfig", master,
               a.bin_dir, shared)
    check_tool(root, "kvpool-node", NODE_TOOL, "NodeConfig", node, a.bin_dir,
               shared)
    check_cluster(root, master, node, cluster)
    check_python(root, cluster)
    check_python_store(root, client)
    check_docs(root, {"MasterConfig": master, "NodeConfig": node,
                      "ClientConfig": client},
               {"MasterConfig": TOOL_ONLY_FLAGS["kvpool-master"],
                "NodeConfig": TOOL_ONLY_FLAGS["kvpool-node"]})
    check_to_string(root, master)
    check_policy_options(root, master)
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} disagreement(s) between a knob's declaration "
              "and its copies (CONTRIBUTING.md, 'Add a knob')")
        return 1
    print(f"knobs agree: {len(master)} MasterConfig, {len(node)} NodeConfig, "
          f"{len(client)} ClientConfig, {len(cluster)} LocalClusterOptions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
