"""What the thesis benchmarks share: paths to this checkout's dac and the examples, a
table printer with the thesis' figures beside ours, and figures written with
matplotlib when it is installed (``pip install matplotlib``; without it the table
is printed and the figure skipped, with a note)."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
EXAMPLES = os.path.join(ROOT, "examples")
for _p in (EXAMPLES, BENCH, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)


def table(title: str, headers: list, rows: list) -> None:
    """Print ``rows`` (lists of cells) under ``headers``, columns sized to fit."""
    cells = [[str(h) for h in headers]] + [[_cell(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    print(title)
    for k, r in enumerate(cells):
        print("  " + "  ".join(c.rjust(w) for c, w in zip(r, widths)))
        if k == 0:
            print("  " + "  ".join("-" * w for w in widths))


def _cell(c) -> str:
    if isinstance(c, float):
        return f"{c:.3f}" if abs(c) < 100 else f"{c:.1f}"
    return "" if c is None else str(c)


def figure(path: str | None, draw) -> str:
    """Call ``draw(plt)`` and save the figure to ``path``; returns what happened, in
    words (printed by the caller)."""
    if not path:
        return "no figure asked for"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"figure {path} skipped: it needs matplotlib (pip install matplotlib)"
    fig = draw(plt)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return f"figure written to {path}"


def run_main(main, name: str) -> None:
    """Exit with ``main()``'s status; on Ctrl-C, with 130 and one line (not the
    traceback of wherever it struck: drawing a figure, it ran through a library's
    own handled errors)."""
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        sys.exit(130)
