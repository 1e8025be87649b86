#!/usr/bin/env python3
"""Generate graphrun's man page (graphrun.1, roff) and bash completion (graphrun.bash) from the
CLI's own help, so they cannot drift from it: `graphrun --help`, each subcommand's --help and
`graphrun --list-models`. CMake runs it after building graphrun (CMakeLists.txt, "man page and
completion"); tests/cli_docs.sh checks the results.

Usage: gen_docs.py GRAPHRUN OUT_DIR

What the completion knows, read from the help text:
  - the subcommands (the "usage:" lines of `graphrun --help`)
  - each command's flags: every --flag its help names (the detect flags for compare, whose help
    says "as for detect")
  - which flags take a value: a flag followed by an upper-case placeholder (--batch N, --input
    FILE); FILE completes file names, DIR folders
  - value choices: `--prec fp32|fp16|int8|auto`, or a description that starts with a list such as
    "auto (default), cpu, gpu" or "... method: max (default), percentile, entropy, mse";
    --model's are `graphrun --list-models`.
"""
import re
import subprocess
import sys

SUBCOMMANDS = ["detect", "plan", "compare", "eval", "bench"]
FLAG = r"--[a-z0-9][a-z0-9-]*"
WORD = re.compile(r"^[a-z0-9][a-z0-9_.]*$")


def run(graphrun, *args):
    out = subprocess.run([graphrun, *args], capture_output=True, text=True, check=True)
    return out.stdout


def option_entries(text):
    """[(left column, description)] of the help's option lines, continuation lines joined."""
    entries = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("--"):
            parts = re.split(r"\s{2,}", stripped, maxsplit=1)
            entries.append([parts[0], parts[1] if len(parts) > 1 else ""])
        elif entries and entries[-1] and line.startswith("      ") and stripped:
            entries[-1][1] += " " + stripped
        elif not line.startswith(" "):
            entries.append(None)  # a heading or a paragraph ends the option
    return [e for e in entries if e]


def choices_in_description(desc):
    """A list of lower-case words the description starts with, or one of its ':' / ';' segments
    is ("auto (default), cpu, gpu")."""
    desc = re.sub(r"\([^)]*\)", "", desc)
    for segment in re.split(r"[:;]", desc):
        items = [i.strip() for i in re.split(r",|\bor\b", segment)]
        items = [i for i in items if i]
        if len(items) >= 2 and all(WORD.match(i) for i in items):
            return items
    return []


def parse_command(text):
    """{flag: {"value": kind or None, "choices": [...]}} for one command's help."""
    flags = {}
    for match in re.finditer(r"(%s(?:/%s)*)(?:[ =]([A-Za-z0-9_|]+))?" % (FLAG, FLAG), text):
        names, arg = match.group(1).split("/"), match.group(2) or ""
        for name in names:
            info = flags.setdefault(name, {"value": None, "choices": []})
            if len(names) == 1 and re.match(r"^[A-Z][A-Z0-9_]*$", arg):
                info["value"] = info["value"] or arg
            elif len(names) == 1 and re.match(r"^[a-z0-9]+(\|[a-z0-9]+)+$", arg):
                info["value"] = info["value"] or "CHOICE"
                info["choices"] = info["choices"] or arg.split("|")
    for left, desc in option_entries(text):
        match = re.match(r"^(%s) ([A-Z][A-Z0-9_]*)$" % FLAG, left)
        if match and not flags[match.group(1)]["choices"]:
            flags[match.group(1)]["choices"] = choices_in_description(desc)
    flags.pop("--help", None)
    flags.pop("--version", None)
    flags["--help"] = {"value": None, "choices": []}
    return flags


# ---- man page ----------------------------------------------------------------------------------

def roff(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text.startswith((".", "'")) else text


def man_section(title, text):
    out = [".SH %s" % roff(title.upper())]
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            out.append(".PP")
        elif stripped.startswith("usage:") or (line.startswith(" ") and out[-1] == ".fi"
                                               and not stripped.startswith("--")):
            block = [line]
            while i + 1 < len(lines) and lines[i + 1].startswith(" ") and \
                    not lines[i + 1].strip().startswith("--"):
                i += 1
                block.append(lines[i])
            if out[-1] == ".fi":
                out.pop()
            else:
                out.append(".nf")
            out += [roff(b) for b in block] + [".fi"]
        elif stripped.startswith("--"):
            parts = re.split(r"\s{2,}", stripped, maxsplit=1)
            desc = [parts[1]] if len(parts) > 1 else []
            while i + 1 < len(lines) and lines[i + 1].startswith("      ") and \
                    lines[i + 1].strip() and not lines[i + 1].strip().startswith("--"):
                i += 1
                desc.append(lines[i].strip())
            out += [".TP", ".B %s" % roff(parts[0])] + [roff(d) for d in desc]
        elif not line.startswith(" ") and len(stripped) < 30 and ":" not in stripped:
            out.append(".SS %s" % roff(stripped))
        else:
            out.append(roff(stripped))
        i += 1
    return out


def man_page(version, helps):
    out = ['.TH GRAPHRUN 1 "" "graphrun %s" "User Commands"' % version,
           ".SH NAME",
           "graphrun \\- run Darknet\\-family CNNs (YOLO) on the GPU or the CPU reference",
           ".SH SYNOPSIS", ".nf"]
    out += [roff(l.replace("usage:", "").strip()) for l in helps["detect"].splitlines()
            if l.startswith(("usage:", "       graphrun"))]
    out += [".fi", ".SH DESCRIPTION",
            "graphrun builds an engine for a Darknet .cfg and .weights (or a built\\-in model), "
            "runs it on images and prints the detections; its subcommands show the plan, compare "
            "precisions, measure mAP and benchmark. This page is generated from the help each "
            "command prints (\\fBgraphrun\\fR \\fIcommand\\fR \\fB\\-\\-help\\fR)."]
    for sub in SUBCOMMANDS:
        title = "graphrun [detect]" if sub == "detect" else "graphrun " + sub
        out += man_section(title, helps[sub])
    out += [".SH FILES", ".TP", ".I <prefix>/share/graphrun",
            "The bundled photos (the default input and int8 calibration images), the shapes "
            "model's weights and its calibration and validation images, found relative to the "
            "installed program.",
            ".SH \"SEE ALSO\"",
            "README.md and docs/ in graphrun's source: docs/errors.md (exit statuses and "
            "messages), docs/tactics.md, docs/calibration.md."]
    return "\n".join(out) + "\n"


# ---- bash completion ---------------------------------------------------------------------------

def completion(commands, models):
    lines = ["# bash completion for graphrun, generated from its --help by tools/gen_docs.py.",
             "_graphrun() {",
             "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} sub=detect",
             "  case ${COMP_WORDS[1]} in %s) sub=${COMP_WORDS[1]} ;; esac" % "|".join(SUBCOMMANDS),
             "  case $sub:$prev in"]
    for sub, flags in commands.items():
        for name, info in sorted(flags.items()):
            choices = models if name == "--model" and info["value"] else info["choices"]
            if choices:
                action = 'COMPREPLY=($(compgen -W "%s" -- "$cur"))' % " ".join(choices)
            elif info["value"] in ("FILE",):
                action = 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"))'
            elif info["value"] in ("DIR",):
                action = 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur"))'
            elif info["value"]:
                action = "COMPREPLY=()"
            else:
                continue
            lines.append("    %s:%s) %s; return ;;" % (sub, name, action))
    lines += ["  esac", "  local words", "  case $sub in"]
    for sub, flags in commands.items():
        words = " ".join(sorted(flags))
        lines.append('    %s) words="%s" ;;' % (sub, words))
    lines += ["  esac",
              '  [ "$COMP_CWORD" -eq 1 ] && words="%s $words"' % " ".join(SUBCOMMANDS),
              '  COMPREPLY=($(compgen -W "$words" -- "$cur"))',
              "}",
              "complete -F _graphrun graphrun"]
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[4], file=sys.stderr)
        return 2
    graphrun, out_dir = argv[1], argv[2]
    helps = {"detect": run(graphrun, "--help")}
    for sub in SUBCOMMANDS[1:]:
        helps[sub] = run(graphrun, sub, "--help")
    commands = {sub: parse_command(helps[sub]) for sub in SUBCOMMANDS}
    # compare takes the detect flags its help lists "as for detect".
    for name, info in commands["detect"].items():
        if name in commands["compare"] and not commands["compare"][name]["choices"]:
            commands["compare"][name] = dict(info)
    models = run(graphrun, "--list-models").split()
    version = run(graphrun, "--version").split()[-1]
    with open(out_dir + "/graphrun.1", "w") as f:
        f.write(man_page(version, helps))
    with open(out_dir + "/graphrun.bash", "w") as f:
        f.write(completion(commands, models))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
