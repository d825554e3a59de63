"""Small charts drawn on the server as SVG (no script, no build step): a tool's calls per bucket as
bars, errors stacked in red, and its p95 latency as a line on its own scale.

Only numbers go into the drawing; the one text (the title, for screen readers and hover) is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from toolweave.store.stats import Tally, percentile

WIDTH = 360
HEIGHT = 64
PAD = 2


def health_chart(series: Sequence[tuple[int, Tally]], title: str) -> str:
    """The SVG for one tool's buckets, oldest on the left."""
    count = max(len(series), 1)
    step = (WIDTH - 2 * PAD) / count
    most = max((tally.calls for _, tally in series), default=0) or 1
    p95s = [percentile(tally.histogram, 0.95) for _, tally in series]
    slowest = max((p for p in p95s if p is not None), default=0.0) or 1.0
    usable = HEIGHT - 2 * PAD
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" class="chart-bg" fill="#f4f5f7"/>',
    ]
    for index, (_bucket, tally) in enumerate(series):
        if not tally.calls:
            continue
        x = PAD + index * step
        width = max(step - 1, 1)
        height = usable * tally.calls / most
        ok_height = height * (tally.calls - tally.errors) / tally.calls
        parts.append(_bar(x, HEIGHT - PAD - height, width, height - ok_height, "chart-errors", "#c62828"))
        parts.append(_bar(x, HEIGHT - PAD - ok_height, width, ok_height, "chart-calls", "#5c7cba"))
    points = [
        f"{PAD + (index + 0.5) * step:.1f},{HEIGHT - PAD - usable * p95 / slowest:.1f}"
        for index, p95 in enumerate(p95s)
        if p95 is not None
    ]
    if len(points) > 1:
        parts.append(
            f'<polyline class="chart-p95" fill="none" stroke="#e08a00" stroke-width="1.5" points="{" ".join(points)}"/>'
        )
    elif points:
        cx, cy = points[0].split(",")
        parts.append(f'<circle class="chart-p95" fill="#e08a00" cx="{cx}" cy="{cy}" r="2"/>')
    parts.append("</svg>")
    return "".join(parts)


def _bar(x: float, y: float, width: float, height: float, css: str, fill: str) -> str:
    if height <= 0:
        return ""
    return f'<rect class="{css}" fill="{fill}" x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}"/>'
