"""Draw the dataflow kernel's per-task timeline (bench/12_dataflow_trace --csv) as an SVG.

One row per SM (the blocks of an SM share its row, stacked thinly), time left to right; each
task is a bar from its claim to its publish: pale while it waits for its producers, solid while
it computes, coloured by its layer. Used for docs/dataflow-timeline.svg.

    python3 bench/dataflow_timeline.py TRACE.csv OUT.svg [--title TEXT]
"""
import argparse
import csv
import colorsys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("svg")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{a.csv}: no tasks")
    for r in rows:
        for k in ("claim_us", "ready_us", "done_us"):
            r[k] = float(r[k])
        for k in ("sm", "block", "layer", "node"):
            r[k] = int(r[k])
    span = max(r["done_us"] for r in rows)
    sms = sorted({r["sm"] for r in rows})
    row_of = {s: i for i, s in enumerate(sms)}
    nodes = sorted({r["node"] for r in rows})
    hue = {n: i / max(1, len(nodes)) for i, n in enumerate(nodes)}
    per_sm = {}
    for r in rows:
        per_sm.setdefault(r["sm"], set()).add(r["block"])
    lane = {}
    for s, blocks in per_sm.items():
        for i, b in enumerate(sorted(blocks)):
            lane[(s, b)] = (i, len(blocks))
    W, left, top, row_h = 1100, 60, 40, 6
    H = top + row_h * len(sms) + 60
    sx = (W - left - 20) / span
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{left}" y="16">{a.title or a.csv}: {len(rows)} tasks on {len(sms)} SMs, '
           f'{span:.1f} us (pale: waiting for producers; solid: computing; colour: layer)</text>']
    def colour(node):
        rgb = colorsys.hsv_to_rgb(hue[node], 0.75, 0.85)
        return "#%02x%02x%02x" % tuple(int(255 * c) for c in rgb)

    # one group per node and phase (waiting pale, computing solid): the file stays small
    for n in nodes:
        for phase, (t0, t1), extra in (("wait", ("claim_us", "ready_us"), ' opacity=".25"'),
                                       ("compute", ("ready_us", "done_us"), "")):
            out.append(f'<g fill="{colour(n)}"{extra}>')
            for r in rows:
                if r["node"] != n:
                    continue
                i, k = lane[(r["sm"], r["block"])]
                y = top + row_of[r["sm"]] * row_h + i * row_h / k
                h = max(row_h / k - 0.5, 0.5)
                x0, x1 = left + r[t0] * sx, left + r[t1] * sx
                out.append(f'<rect x="{x0:.0f}" y="{y:.1f}" width="{max(x1 - x0, 0.5):.1f}" '
                           f'height="{h:.1f}"/>')
            out.append("</g>")
    base = top + row_h * len(sms) + 14
    step = 10 ** len(str(int(span))) / 10 if span >= 10 else 1
    t = 0.0
    while t <= span:
        x = left + t * sx
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{base - 10}" stroke="#ccc" '
                   f'stroke-width="0.5"/><text x="{x:.1f}" y="{base}" text-anchor="middle">'
                   f'{t:g} us</text>')
        t += step
    out.append(f'<text x="8" y="{top + 10}">SM</text>')
    for i, n in enumerate(nodes):
        layer = next(r["layer"] for r in rows if r["node"] == n)
        op = next(r["op"] for r in rows if r["node"] == n)
        col = colour(n)
        x = left + (i % 9) * 115
        y = base + 16 + (i // 9) * 14
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{col}"/>'
                   f'<text x="{x + 14}" y="{y}">L{layer} {op}</text>')
    out.append("</svg>")
    H2 = base + 16 + ((len(nodes) + 8) // 9) * 14 + 6
    out[0] = out[0].replace(f'height="{H}"', f'height="{H2}"')
    out[1] = out[1].replace(f'height="{H}"', f'height="{H2}"')
    with open(a.svg, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
