#!/usr/bin/env python3
"""The layering of the library, checked on its sources and object files.

    python3 tests/test_layers.py SOURCE_DIR OBJECT_DIR

docs/design.md states the rules: data flows one way (lang -> ir ->
polyhedral -> codegen -> runtime -> autotune), each folder must not know
what lies to its right, and no file imports a file that imports it back.
This test fails, listing every offence, when

  1. the include graph has a cycle: module A (a.c and a.h) includes the
     header of module B, and B's files include A's header, directly or
     through other modules;
  2. the symbol graph has a cycle: a.o uses a function or variable that b.o
     defines and b.o, directly or through other files, uses one of a.o's
     (the object files of the static library under OBJECT_DIR);
  3. a folder uses a folder to its right (by symbols, and by includes), or
     calls isl or LLVM where it must not know them (lang/ and ir/: neither;
     polyhedral/: no LLVM; autotune/: no LLVM or isl);
  4. a file of runtime/ other than a backend's own file calls a code
     generator (tc_cg_llvm_*, tc_cg_jit_*, tc_cg_code_*): runtime dispatches
     on the backend table (runtime/backend.h) alone;
  5. a file of tools/ includes a library header other than include/tcomp.h
     and the few design.md allows it: lang/util.h and lang/types.h (the
     allocation hooks and dtype names tools/npy.c shares), ir/half.h (float16
     conversions for .npy), runtime/cache_ops.h (the kernel cache's
     management layer behind `tcomp cache`).
"""

import os
import re
import subprocess
import sys

FOLDERS = ["lang", "ir", "polyhedral", "codegen", "runtime", "autotune"]
RANK = {f: i for i, f in enumerate(FOLDERS)}
# external symbol prefixes a folder must not use
FORBIDDEN_EXTERNAL = {
    "lang": ["isl_", "LLVM"],
    "ir": ["isl_", "LLVM"],
    "polyhedral": ["LLVM"],
    "autotune": ["isl_", "LLVM"],
}
# runtime files allowed to call code generators directly (the backends)
BACKEND_FILES = re.compile(r"^runtime/backend_\w+\.c$")
CODEGEN_CALL = re.compile(r"^tc_cg_(llvm|jit|code)_")
TOOLS_ALLOWED = {"lang/util.h", "lang/types.h", "ir/half.h", "runtime/cache_ops.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sccs(graph):
    """Tarjan's strongly connected components with more than one node."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def cycle_in(graph, comp):
    """One cycle through comp's first node, as a path, for the message."""
    start = comp[0]
    members = set(comp)
    path, seen = [start], {start}

    def dfs(v):
        for w in sorted(graph.get(v, ())):
            if w == start and len(path) > 1:
                return True
            if w in members and w not in seen:
                seen.add(w)
                path.append(w)
                if dfs(w):
                    return True
                path.pop()
        return False

    dfs(start)
    return " -> ".join(path + [start])


def folder(path):
    return path.split("/", 1)[0]


def include_graph(src):
    """module -> modules whose header it includes (module: path without
    extension; a header and its .c are one module)."""
    graph, files = {}, []
    for f in FOLDERS:
        for name in sorted(os.listdir(os.path.join(src, f))):
            if name.endswith((".c", ".h")):
                files.append(f + "/" + name)
    for rel in files:
        mod = rel.rsplit(".", 1)[0]
        text = open(os.path.join(src, rel), encoding="utf-8", errors="replace").read()
        for inc in INCLUDE.findall(text):
            target = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
            if not os.path.exists(os.path.join(src, target)):
                continue  # include/tcomp.h and system headers
            tmod = target.rsplit(".", 1)[0]
            if tmod != mod:
                graph.setdefault(mod, set()).add(tmod)
        graph.setdefault(mod, set())
    return graph


def nm(path, *flags):
    r = subprocess.run(["nm", *flags, path], capture_output=True, text=True, check=True)
    return r.stdout


def symbol_graph(src, objdir):
    """file -> files whose symbols it uses; file -> undefined symbols
    (object files whose source is gone, left by an earlier build, aside)."""
    defined, undefined = {}, {}
    for root, _, names in os.walk(objdir):
        for name in names:
            if not name.endswith(".c.o"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, objdir)[:-2]  # runtime/kernel.c
            if folder(rel) not in RANK or not os.path.exists(os.path.join(src, rel)):
                continue
            for line in nm(path, "--defined-only", "-g").splitlines():
                parts = line.split()
                if len(parts) == 3:
                    defined[parts[2]] = rel
            undefined[rel] = {l.split()[-1] for l in nm(path, "-u").splitlines() if l.strip()}
    graph = {f: set() for f in undefined}
    for f, syms in undefined.items():
        for s in syms:
            g = defined.get(s)
            if g and g != f:
                graph[f].add(g)
    return graph, undefined, defined


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, objdir = sys.argv[1], sys.argv[2]
    problems = []

    inc = include_graph(src)
    for comp in sccs(inc):
        problems.append("include cycle: " + cycle_in(inc, comp))
    for mod, targets in sorted(inc.items()):
        for t in sorted(targets):
            a, b = folder(mod), folder(t)
            if a in RANK and b in RANK and RANK[b] > RANK[a]:
                problems.append(f"{mod} includes {t}: {a}/ must not know {b}/")

    for name in sorted(os.listdir(os.path.join(src, "tools"))):
        if not name.endswith((".c", ".h")):
            continue
        text = open(os.path.join(src, "tools", name), encoding="utf-8").read()
        for written in INCLUDE.findall(text):
            target = os.path.normpath(os.path.join("tools", written))
            if folder(target) in RANK and target not in TOOLS_ALLOWED:
                problems.append(f"tools/{name} includes {target}: tools/ uses include/tcomp.h "
                                "and " + ", ".join(sorted(TOOLS_ALLOWED)) + " only")

    syms, undefined, defined = symbol_graph(src, objdir)
    if not syms:
        problems.append(f"no object files of the library under {objdir}")
    for comp in sccs(syms):
        problems.append("symbol cycle: " + cycle_in(syms, comp))
    for f, targets in sorted(syms.items()):
        for t in sorted(targets):
            a, b = folder(f), folder(t)
            if RANK[b] > RANK[a]:
                used = sorted(s for s in undefined[f] if defined.get(s) == t)
                problems.append(f"{f} uses {t} ({', '.join(used[:3])}): "
                                f"{a}/ must not know {b}/")
    for f, syms_used in sorted(undefined.items()):
        for prefix in FORBIDDEN_EXTERNAL.get(folder(f), []):
            bad = sorted(s for s in syms_used if s.startswith(prefix))
            if bad:
                problems.append(f"{f} calls {prefix}* ({', '.join(bad[:3])}): "
                                f"{folder(f)}/ must not know it")
        if folder(f) == "runtime" and not BACKEND_FILES.match(f):
            bad = sorted(s for s in syms_used if CODEGEN_CALL.match(s))
            if bad:
                problems.append(f"{f} calls a code generator ({', '.join(bad[:3])}): "
                                "runtime/ reaches backends through runtime/backend.h only")

    nmods = len(inc)
    nfiles = len(syms)
    if problems:
        print(f"{len(problems)} layering problem(s) in {nmods} modules / {nfiles} object files:")
        for p in problems:
            print("  " + p)
        sys.exit(1)
    print(f"layers ok: {nmods} modules, {nfiles} object files, no cycles, "
          "no folder reaching right")


if __name__ == "__main__":
    main()
