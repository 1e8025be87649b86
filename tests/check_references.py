#!/usr/bin/env python3
"""Every reference in the tree resolves (CTest `test_references`, run from the source root).

Scans the text files git knows (tracked, plus untracked ones not ignored) with the extensions
.c .h .cu .cuh .md .py .sh .txt and CMakeLists.txt, and reports, one line each as
`file:line: missing ...`:
  - repo-relative paths: a token `dir/name` whose first folder is a top-level folder of the tree
    (`runtime/gpu/dispatch.c`, `../ops/ops.def` from docs/) that is neither a file nor a folder;
  - bare document names (`planner.md`, `LOG.md`) that no file of the tree is called;
  - gr_ names cited in docs/*.md and README.md that no source file (.c .h .cu .cuh .py) mentions;
  - references to numbered issues, in any scanned file: the history behind a choice belongs in
    git log, the choice and its reason in the text;
  - absolute paths of a build machine (under /home, /root or the build machines' own top folder): a reference must
    resolve inside the repository or name its source (a project and its file).
Tokens followed by a placeholder or a wildcard (`ops/<stem>.c`, `bench/NN_*.c`, `gr_op_<stem>`) are
patterns, not references, and are skipped; so are paths named to be absent (`no_such...`,
`no-such...`: tests open them to check the error) and the few paths of other projects in EXTERNAL.
A program may be named without its source's extension (`bench/05_calib`). Exit status 0 when
nothing is missing, 1 otherwise.
"""
import os
import re
import subprocess
import sys

SCANNED_EXT = (".c", ".h", ".cu", ".cuh", ".md", ".py", ".sh", ".txt")
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".py")
PLACEHOLDER_NEXT = set("<*{[$%")

# Paths of other projects that happen to start like one of ours, written where they are
# explained (e.g. Darknet's own data/ folder).  Keep this list short and say why for each.
EXTERNAL = {
    "data/imagenet.shortnames.list",  # Darknet's file that models/imagenet.names was cut from
    "cmake/graphrun/graphrunConfig.cmake",  # under an install prefix's lib/ (install_consumer.sh)
}
# A name that says it must not exist: tests open such paths to check the error.
ABSENT_ON_PURPOSE = re.compile(r"(^|/)no[_-]such")
# A program named by its source without the extension (bench/05_calib is built from 05_calib.c).
PROGRAM_EXT = (".c", ".cu", ".py", ".sh")


def tree_files(root):
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             cwd=root, capture_output=True, text=True, check=True).stdout
        return [f for f in out.splitlines() if os.path.isfile(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith((".git", "build"))]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return files


def scanned(path):
    return path.endswith(SCANNED_EXT) or os.path.basename(path) == "CMakeLists.txt"


def path_tokens(line, tops):
    """(token, resolved path) for each repo-relative path in the line."""
    pattern = re.compile(r"(?<![\w./-])((?:\.\./)*)((?:%s)/[\w./-]*\w)" %
                         "|".join(re.escape(t) for t in sorted(tops, key=len, reverse=True)))
    for m in pattern.finditer(line):
        rest = re.match(r"[\w./-]*", line[m.end():]).group(0)
        if line[m.end() + len(rest):m.end() + len(rest) + 1] in PLACEHOLDER_NEXT:
            continue
        yield m.group(0), m.group(2)


def path_exists(root, path):
    if path in EXTERNAL or ABSENT_ON_PURPOSE.search(path):
        return True
    full = os.path.join(root, path)
    return os.path.exists(full) or any(os.path.isfile(full + e) for e in PROGRAM_EXT)


def doc_tokens(line):
    for m in re.finditer(r"(?<![\w./<*-])([\w-]+\.md)\b", line):
        if not re.search(r">\s*$", line[:m.start()]):  # `> table.md`: a file a command writes
            yield m.group(1)


def main():
    root = os.getcwd()
    files = tree_files(root)
    tops = {f.split("/", 1)[0] for f in files if "/" in f}
    basenames = {os.path.basename(f) for f in files}
    sources = [f for f in files if f.endswith(SOURCE_EXT)]
    identifiers = set()
    for f in sources:
        with open(os.path.join(root, f), errors="replace") as fh:
            identifiers.update(re.findall(r"\bgr_\w+", fh.read()))
    issue = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
    machine = re.compile(r"(?<![\w.~/:-])/(?:work|farm|home|root)/[\w.-]")
    problems = []
    for f in sorted(x for x in files if scanned(x)):
        if f == "tests/check_references.py":
            continue
        cite_names = f.startswith("docs/") and f.endswith(".md") or f == "README.md"
        with open(os.path.join(root, f), errors="replace") as fh:
            lines = fh.read().splitlines()
        for n, line in enumerate(lines, 1):
            for token, path in path_tokens(line, tops):
                if not path_exists(root, path):
                    problems.append(f"{f}:{n}: missing path {token}")
            for doc in doc_tokens(line):
                if doc not in basenames:
                    problems.append(f"{f}:{n}: missing document {doc}")
            if cite_names:
                for m in re.finditer(r"(?<![\w.])gr_[a-z0-9_]*[a-z0-9]\b", line):
                    nxt = line[m.end():m.end() + 1]
                    if nxt not in PLACEHOLDER_NEXT and m.group(0) not in identifiers:
                        problems.append(f"{f}:{n}: missing function {m.group(0)}")
            for m in machine.finditer(line):
                problems.append(f"{f}:{n}: machine path '{line[m.start():].split()[0]}' (name a "
                                "path inside the repository, or the project it comes from)")
            for m in issue.finditer(line):
                problems.append(f"{f}:{n}: issue reference '{m.group(0)}' (say what, not which "
                                "issue: the history is in git log)")
    for p in problems:
        print(p)
    if problems:
        print(f"check_references: {len(problems)} unresolved reference(s)")
        return 1
    print(f"check_references: {sum(1 for x in files if scanned(x))} files, every reference resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
