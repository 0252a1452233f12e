"""``gridgnn report METRICS [--out FILE.html|FILE.png]``: pictures of a finished run from its metrics file.

Needs matplotlib (the ``plots`` extra); without it, one line naming the extra and exit status 2. The output
is written atomically (a temporary file beside it, then a rename).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gridgnn.errors import ConfigError

SUFFIXES = (".html", ".htm", ".png")


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "report", help="draw a run's metrics file: curves, time split, bytes per rank",
        description="Draw a metrics file (gridgnn train --metrics-out): loss and accuracy per epoch, the step "
                    "time split into communication and computation, and on a grid the bytes per rank per phase "
                    "(heat map) and measured against predicted bytes. HTML: one self-contained page with a table "
                    "of the key numbers and the pictures embedded as PNG; PNG: every panel on one image.")
    parser.add_argument("metrics", metavar="METRICS", help="metrics JSON file written by --metrics-out")
    parser.add_argument("--out", metavar="FILE", default=None,
                        help="FILE.html or FILE.png (default: METRICS with the suffix .html)")
    parser.set_defaults(handler=run_report)


def output_path(metrics: str, out: str | None) -> Path:
    """Where the report goes: ``out``, else the metrics file's name with ``.html``; `ConfigError` on another
    suffix."""
    target = Path(out) if out is not None else Path(metrics).with_suffix(".html")
    if target.suffix.lower() not in SUFFIXES:
        raise ConfigError(f"--out must name a .html or .png file, got '{target}'")
    return target


def run_report(args: argparse.Namespace) -> int:
    from gridgnn.report.figures import require_matplotlib

    target = output_path(args.metrics, args.out)
    require_matplotlib()
    from gridgnn.report.figures import panel_figures, panels, png_bytes, report_figure
    from gridgnn.report.page import render_page
    from gridgnn.report.series import read_series
    from gridgnn.train.outputs.metrics import check_writable, write_bytes_atomic

    check_writable(target, "report")
    series = read_series(args.metrics)
    if target.suffix.lower() == ".png":
        data = png_bytes(report_figure(series))
        count = len(panels(series))
    else:
        images = [(name, png_bytes(figure)) for name, figure in panel_figures(series)]
        data = render_page(series, images, args.metrics).encode("utf-8")
        count = len(images)
    write_bytes_atomic(target, data)
    print(f"report     {target} ({count} panels, {len(series.epochs)} epochs)")
    return 0
