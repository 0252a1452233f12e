"""The HTML report: one self-contained page (no script, no external file) holding a table of the run's key
numbers and each panel as a PNG embedded as a base64 ``data:`` URI. Not collective."""

from __future__ import annotations

import base64
import html

from gridgnn.report.series import ReportSeries

_STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
          "table{border-collapse:collapse;margin-bottom:1.5em}"
          "td,th{border:1px solid #ccc;padding:4px 10px;text-align:left}th{background:#f3f3f3}"
          "figure{display:inline-block;margin:0 0 1em 0}img{max-width:100%}")


def render_page(series: ReportSeries, images: list[tuple[str, bytes]], source: str) -> str:
    """The page for ``series``; ``images``: (panel name, PNG bytes) in order; ``source``: the metrics file."""
    rows = "\n".join(f"<tr><th>{html.escape(label)}</th><td>{html.escape(text)}</td></tr>"
                     for label, text in series.summary)
    figures = "\n".join(
        f'<figure id="{html.escape(name)}"><img alt="{html.escape(name)}" '
        f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}"></figure>'
        for name, png in images)
    title = html.escape(series.title)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gridgnn report: {title}"
            f"</title><style>{_STYLE}</style></head>\n<body>\n<h1>{title}</h1>\n"
            f"<p>From <code>{html.escape(source)}</code>.</p>\n<table>\n{rows}\n</table>\n{figures}\n"
            "</body></html>\n")
