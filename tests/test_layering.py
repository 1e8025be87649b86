#!/usr/bin/env python3
"""The folders' layering, checked on the built objects and the sources (docs/calibration.md and
README.md's Layout: data and calls flow one way).

Three kinds of rule, each a list below that grows one line at a time:
  ACYCLIC   folders whose files must not call each other in a circle. File A calls file B when
            one of A's undefined symbols (nm) is defined in B; a circle A -> B -> ... -> A means
            neither file can be read, tested or replaced without the other.
  INCLUDES  a folder (or a file-name prefix) whose sources must not include headers matching a
            pattern (a kernel knows nothing of the runtime that launches it; the planner compiles
            without CUDA).
  EXPERIMENT_HOOKS  the only includes of experimental/ from the rest of the library and the CLI
            (experimental/dataflow/README.md): an experiment can be dropped or moved in by
            touching those lines alone.

Usage: test_layering.py BUILD_DIR [SOURCE_DIR] [--graph PREFIX]
  BUILD_DIR   a configured and built tree (its CMakeFiles/<target>.dir/**.o are read)
  SOURCE_DIR  default: the current directory
  --graph     print the file-level call graph among the files under PREFIX and exit
Exit status 0 when every rule holds, 1 with one line per violation otherwise. Needs python3 and
nm only ($NM names another nm).
"""
import os
import re
import subprocess
import sys

# Groups of folders (prefixes of source paths) whose file-level call graph has no cycle. The
# dataflow executor's runtime part (experimental/) calls into runtime/gpu/ and is called from it:
# the two are checked as one.
ACYCLIC = [
    ("runtime/", "experimental/"),
    ("tools/",),
]

# (folder, pattern of forbidden #include targets, why)
CUDA_HEADERS = r"<(cuda|cublas|cufft|curand|cusparse|nvrtc|mma)[^>]*>"
EXPERIMENTAL = r'"experimental/'
DF = "experimental/dataflow/"
INCLUDES = [
    ("kernels/", r'"(runtime|planner|models|tools)/', "kernels know only ops/ and base/"),
    ("planner/", CUDA_HEADERS, "the planner is pure C, tested without CUDA"),
    ("planner/", r'"(runtime|kernels|tools)/', "the planner sits below the runtime"),
    ("ops/", CUDA_HEADERS, "ops/ is pure C"),
    ("models/", CUDA_HEADERS, "models/ is pure C"),
    ("base/", CUDA_HEADERS, "base/ is pure C"),
    ("base/", r'"(ops|models|planner|kernels|runtime|tools)/', "base/ is the bottom floor"),
    ("models/", r'"(planner|kernels|runtime|tools)/', "models/ knows Darknet, not the engine"),
    ("ops/", r'"(planner|kernels|runtime|tools)/', "ops/ sits below the planner"),
    ("runtime/", r'"tools/', "the library knows nothing of the CLI"),
    ("tools/", r'"(runtime|planner|kernels|ops|models|experimental)/', "the CLI is a client of "
     "include/graphrun/runtime.h (the exceptions, each with its reason, are TOOLS_INTERNAL and "
     "EXPERIMENT_HOOKS)"),
    # The experiment sits on the floors; none of them leans on it.
    ("base/", EXPERIMENTAL, "the library's floors never depend on an experiment"),
    ("ops/", EXPERIMENTAL, "the library's floors never depend on an experiment"),
    ("models/", EXPERIMENTAL, "the library's floors never depend on an experiment"),
    ("planner/", EXPERIMENTAL, "the library's floors never depend on an experiment"),
    ("kernels/", EXPERIMENTAL, "the library's floors never depend on an experiment"),
    ("runtime/", EXPERIMENTAL, "the runtime reaches an experiment only through EXPERIMENT_HOOKS"),
    # Inside the dataflow executor, the layers keep the library's rules.
    (DF + "format.h", r'"', "the program format is the contract both sides include: it includes "
     "nothing of the project"),
    (DF + "plan", CUDA_HEADERS, "the program is pure C, built and tested without CUDA"),
    (DF + "plan", r'"(runtime|kernels|tools)/|"experimental/dataflow/(kernel|runtime)',
     "the program sits with the planner, below the runtime"),
    (DF + "kernel", r'"(runtime|planner|models|tools)/|"experimental/dataflow/(plan|runtime)',
     "the kernel knows only kernels/, ops/, base/ and the program format, as kernels/ does"),
]

# The rest of the library's and the CLI's includes of experimental/: (file, header, why). Every
# other include of it from runtime/ or tools/ fails (and from the floors, with no exception).
EXPERIMENT_HOOKS = [
    ("runtime/gpu/backend.h", DF + "format.h",
     "a variant holds the dataflow program and its trace records (gpu_variant's df_ fields)"),
    ("runtime/gpu/engine.c", DF + "plan.h",
     "the executor switch: which executor runs a variant (option, fallback, AUTO's timing)"),
    ("runtime/gpu/debug.c", DF + "plan.h",
     "the tests' and bench's hooks into the kernel (runtime/gpu/debug.h)"),
    ("tools/cmd_plan.c", DF + "plan.h", "`graphrun plan` says whether the dataflow executor "
     "could run the plan"),
]

# The CLI's reaches past the public header, in one place, each with its reason: (file, header,
# why). base/ (allocation, checked errors and file reading, linked into the CLI as into the
# library) is not listed: it is the floor every client stands on. A new line here is a decision:
# prefer growing runtime.h (or a public introspection header) when a second client would need it.
TOOLS_INTERNAL = [
    ("tools/bench_core.c", "runtime/build_detail.h",
     "`graphrun bench` prints the build's internal split (allocation, tactic search, capture)"),
    ("tools/cli_trace.c", "planner/plan.h", "`--trace` names each plan node beside its time"),
    ("tools/cmd_plan.c", "planner/plan.h", "`graphrun plan` prints the plan itself"),
    ("tools/cmd_plan.c", "planner/tasks.h", "`graphrun plan --tasks` prints the row-band tasks"),
    # (tools/cmd_plan.c's include of the dataflow program is an EXPERIMENT_HOOKS line)
    ("tools/cmd_compare.c", "runtime/precision/calib_cache.h",
     "`graphrun compare` reports what a calibration cache holds"),
    ("tools/cmd_compare.c", "runtime/precision/file_scales.h",
     "`compare --per-layer` traces int8 with an ONNX Q/DQ file's own scales, as the build does"),
    ("tools/cmd_compare.c", "runtime/image/image.h",
     "`graphrun compare` resolves a network's automatic preprocessing as the engine does"),
    ("tools/cmd_stream.c", "runtime/files.h", "the folder pipeline's stage report"),
    ("tools/eval.c", "runtime/detect.h", "mAP matching reuses the library's box IoU"),
    ("tools/json.c", "runtime/jsonl.h", "one JSON string escaper for the CLI and the library"),
    ("tools/results.c", "runtime/jsonl.h", "one JSON string escaper for the CLI and the library"),
]

# The targets whose objects make up the call graph (a missing one is skipped).
TARGETS = ["graphrun_obj", "graphrun_cli"]

SOURCE_SUFFIXES = (".c", ".h", ".cu", ".cuh")


def objects(build_dir, source_dir):
    """{source path relative to the source root: object path} of every object of TARGETS whose
    source still exists (a removed or renamed file leaves its object behind)."""
    found = {}
    for target in TARGETS:
        root = os.path.join(build_dir, "CMakeFiles", target + ".dir")
        for dirpath, _, names in os.walk(root):
            for name in names:
                if not name.endswith(".o"):
                    continue
                path = os.path.join(dirpath, name)
                src = os.path.relpath(path, root)[: -len(".o")]
                if any(os.path.exists(os.path.join(d, src)) for d in (source_dir, build_dir)):
                    found[src] = path
    return found


def symbols(objs):
    """{source: (defined global symbols, undefined symbols)}, from one nm over every object."""
    nm = os.environ.get("NM") or "nm"
    source_of = {path: src for src, path in objs.items()}
    table = {src: (set(), set()) for src in objs}
    out = subprocess.run([nm, "-P", "-A"] + sorted(source_of), check=True, capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        path, _, rest = line.partition(": ")
        fields = rest.split()
        if path not in source_of or len(fields) < 2:
            continue
        defined, undefined = table[source_of[path]]
        name, kind = fields[0], fields[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper():
            defined.add(name)
    return table


def call_graph(objs):
    """{file: set of files it calls} over every object."""
    table = symbols(objs)
    definer = {}
    for src, (defined, _) in table.items():
        for name in defined:
            definer[name] = src
    graph = {}
    for src, (_, undefined) in table.items():
        graph[src] = {definer[n] for n in undefined if n in definer and definer[n] != src}
    return graph


def find_cycle(graph, nodes):
    """One cycle [a, b, ..., a] among `nodes`, or None."""
    state = {n: 0 for n in nodes}  # 0 unseen, 1 on the path, 2 done
    path = []

    def visit(n):
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if m not in state:
                continue
            if state[m] == 1:
                return path[path.index(m):] + [m]
            if state[m] == 0:
                cycle = visit(m)
                if cycle:
                    return cycle
        path.pop()
        state[n] = 2
        return None

    for n in sorted(nodes):
        if state[n] == 0:
            cycle = visit(n)
            if cycle:
                return cycle
    return None


def internal_allowed(rel, line):
    """An include that TOOLS_INTERNAL or EXPERIMENT_HOOKS lists for this file."""
    return any(rel == f and f'"{h}"' in line for f, h, _ in TOOLS_INTERNAL + EXPERIMENT_HOOKS)


def include_violations(source_dir):
    bad = []
    for prefix, pattern, why in INCLUDES:
        regex = re.compile(r"^\s*#\s*include\s*(" + pattern + ")")
        folder = prefix if prefix.endswith("/") else os.path.dirname(prefix)
        for dirpath, _, names in os.walk(os.path.join(source_dir, folder)):
            for name in sorted(names):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, source_dir)
                if not name.endswith(SOURCE_SUFFIXES) or not rel.startswith(prefix):
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        match = regex.match(line)
                        if match and not internal_allowed(rel, line):
                            bad.append(f"{rel}:{number}: includes {match.group(1)}...: {why}")
    return bad


def main(argv):
    args = [a for a in argv[1:] if a != "--graph"]
    graph_prefix = None
    if "--graph" in argv:
        at = argv.index("--graph")
        if at + 1 >= len(argv):
            print("test_layering: --graph needs a folder prefix", file=sys.stderr)
            return 2
        graph_prefix = argv[at + 1]
        args.remove(graph_prefix)
    if not args:
        print(__doc__.strip().splitlines()[-7], file=sys.stderr)
        return 2
    build_dir = args[0]
    source_dir = args[1] if len(args) > 1 else "."
    objs = objects(build_dir, source_dir)
    if not objs:
        print(f"test_layering: no objects under {build_dir}/CMakeFiles (build it first)")
        return 1
    graph = call_graph(objs)
    if graph_prefix:
        for src in sorted(s for s in graph if s.startswith(graph_prefix)):
            callees = sorted(c for c in graph[src] if c.startswith(graph_prefix))
            print(f"{src} -> {', '.join(callees) if callees else '(none)'}")
        return 0
    problems = []
    for prefixes in ACYCLIC:
        nodes = [s for s in graph if s.startswith(prefixes)]
        cycle = find_cycle(graph, nodes)
        if cycle:
            problems.append(f"call cycle among {' '.join(prefixes)} files: {' -> '.join(cycle)}")
    problems += include_violations(source_dir)
    for f, h, _ in TOOLS_INTERNAL + EXPERIMENT_HOOKS:  # a stale exception hides the next real one
        path = os.path.join(source_dir, f)
        if not os.path.exists(path) or f'#include "{h}"' not in open(path, errors="replace").read():
            problems.append(f"TOOLS_INTERNAL or EXPERIMENT_HOOKS lists {f} including {h}, which "
                            "it no longer does")
    for line in problems:
        print(line)
    checked = sum(1 for s in graph if any(s.startswith(p) for p in ACYCLIC))
    print(f"test_layering: {len(problems)} violation(s); {checked} files checked for cycles, "
          f"{len(INCLUDES)} include rules")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
