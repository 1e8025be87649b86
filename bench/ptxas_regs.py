#!/usr/bin/env python3
"""Registers and spills of every kernel, before and after a change, without a GPU: ptxas's own
report (`nvcc -Xptxas -v`) for each CUDA file of a git revision and of the working tree, and the
functions whose registers, spill stores or spill loads differ. A kernel whose registers grow can
lose a block per SM, one that starts spilling loads local memory in its loop: this is the check to
make before spending device time on a kernel change (docs/performance.md, "SiLU in the epilogue").

  python3 bench/ptxas_regs.py BASE_REF [FILE.cu ...] [--arch 90] [--jobs 2]

FILEs are repository paths (default: kernels/*.cu and experimental/dataflow/*.cu). Functions are
matched by name, demangled by binutils' c++filt where present, nvcc's per-file hash left out. Exit status 0 when
nothing differs, 1 when something does, 2 on a compile error or bad arguments."""
import argparse
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import tempfile


def compile_report(tree, path, arch):
    """ptxas's -v lines for one file of one source tree: {function: (registers, stores, loads)}."""
    cmd = ["nvcc", f"-gencode=arch=compute_{arch},code=sm_{arch}", "-std=c++17", "-O3",
           "--expt-relaxed-constexpr", f"-I{tree}", f"-I{os.path.join(tree, 'include')}",
           "-Xptxas", "-v", "-c", "-o", os.devnull, os.path.join(tree, path)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{tree}/{path}: nvcc failed:\n{run.stderr[-2000:]}")
    funcs, cur = {}, None
    for line in run.stderr.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            cur = m.group(1)
            funcs.setdefault(cur, [0, 0, 0])
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            funcs[cur][1], funcs[cur][2] = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            funcs[cur][0] = int(m.group(1))
    return {k: tuple(v) for k, v in funcs.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("base", help="git revision to compare the working tree with")
    ap.add_argument("files", nargs="*", help="CUDA files (repository paths)")
    ap.add_argument("--arch", default="90", help="SM version (default 90)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                          text=True, check=True).stdout.strip()
    files = args.files or sorted(
        os.path.relpath(p, root) for pattern in ("kernels/*.cu", "experimental/dataflow/*.cu")
        for p in glob.glob(os.path.join(root, pattern)))
    bad = [f for f in files if not f.endswith(".cu")]
    if bad:
        print(f"ptxas_regs: {bad[0]}: not a CUDA file (.cu); headers are compiled through the "
              ".cu files that include them", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as before:
        archive = subprocess.run(["git", "-C", root, "archive", args.base], capture_output=True)
        if archive.returncode != 0:
            print(f"ptxas_regs: git archive {args.base}: {archive.stderr.decode().strip()}",
                  file=sys.stderr)
            return 2
        subprocess.run(["tar", "x", "-C", before], input=archive.stdout, check=True)
        jobs = [(tree, f) for f in files for tree in (before, root)
                if os.path.exists(os.path.join(tree, f))]
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {job: pool.submit(compile_report, job[0], job[1], args.arch) for job in jobs}
            try:
                reports = {job: fut.result() for job, fut in futures.items()}
            except RuntimeError as err:
                print(f"ptxas_regs: {err}", file=sys.stderr)
                return 2
    # Function names: demangled where binutils' c++filt is there (anonymous namespaces then carry no
    # hash), with nvcc's per-file hash (_INTERNAL_<hash>_<n>_<file>_cu_<hash>) replaced by H.
    raw = sorted({k for r in reports.values() for k in r})
    try:
        out = subprocess.run(["c++filt"], input="\n".join(raw), capture_output=True, text=True,
                             check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        out = []
    shown = out if len(out) == len(raw) else raw
    key = {r: re.sub(r"[0-9a-f]{8}_\d+_\w+?_cu_[0-9a-f]{8}", "H", d) for r, d in zip(raw, shown)}
    reports = {job: {key[k]: v for k, v in r.items()} for job, r in reports.items()}
    differ = 0
    for f in files:
        old, new = reports.get((before, f), {}), reports.get((root, f), {})
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        print(f"{f}: {len(old)} -> {len(new)} functions, {len(changed)} differ")
        for k in changed:
            fmt = lambda v: "-" if v is None else f"{v[0]} regs, spills {v[1]}/{v[2]} B"
            print(f"  {k}: {fmt(old.get(k))} -> {fmt(new.get(k))}")
        differ += len(changed)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
