"""Throughput over the last hour as an inline SVG bar chart, drawn on the server (no JavaScript)."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

from mysqlq.core.jobs import Status

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 720, 180, 44, 22, 10
COLOURS: dict[str, str] = {Status.DONE: "#3b7d3b", Status.DEAD: "#c0392b", Status.CANCELLED: "#999999"}


def per_minute(rows: Sequence[tuple[str, str, int, int]], minutes: int) -> dict[str, list[int]]:
    """status → jobs per minute, oldest minute first, summed over queues."""
    series: dict[str, list[int]] = {status: [0] * minutes for status in COLOURS}
    for _queue, status, ago, count in rows:
        if status in series and 0 <= ago < minutes:
            series[status][minutes - 1 - ago] += count
    return series


def _nice_top(value: int) -> int:
    """A round number at least ``value`` for the y axis (1, 2, 5 × a power of ten)."""
    top = 1
    while True:
        for step in (1, 2, 5):
            if step * top >= value:
                return step * top
        top *= 10


def throughput_svg(series: dict[str, list[int]], minutes: int) -> Markup:
    """Stacked bars per minute (done, dead, cancelled), a y axis in jobs/min, and minutes-ago labels."""
    totals = [sum(values[i] for values in series.values()) for i in range(minutes)]
    top = _nice_top(max([*totals, 2]))  # at least 2, so the half-way line is a whole number
    plot_w, plot_h = WIDTH - LEFT - 6, HEIGHT - BOTTOM - TOP
    bar = plot_w / minutes
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
             f'aria-label="jobs finished per minute over the last {minutes} minutes">']
    for fraction in (0, 0.5, 1):
        y = TOP + plot_h * (1 - fraction)
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - 6}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{round(top * fraction)}</text>')
    for i in range(minutes):
        base = float(TOP + plot_h)
        for status, values in series.items():
            if not values[i]:
                continue
            height = plot_h * values[i] / top
            base -= height
            parts.append(f'<rect x="{LEFT + i * bar + 0.5:.1f}" y="{base:.1f}" width="{max(bar - 1, 1):.1f}" '
                         f'height="{height:.1f}" fill="{COLOURS[status]}"><title>{values[i]} {escape(status)}, '
                         f'{minutes - 1 - i} min ago</title></rect>')
    for ago in range(minutes, -1, -15):
        x = LEFT + (minutes - ago) * bar
        anchor = "end" if ago == 0 else "start" if ago == minutes else "middle"
        parts.append(f'<text x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="{anchor}">'
                     f'{"now" if ago == 0 else f"-{ago} min"}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
