"""Inline SVG charts for the self-contained HTML report (no scripts, no network): interval panels, scatter, DET, histogram,
colour scales."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from audits.reports.formatting import (
    attrs,
    ci_text,
    esc,
    num_attr,
    pct,
    truncate,
)


def nice_max(x: float) -> float:
    if x <= 0 or not math.isfinite(x):
        return 1.0
    exp = 10 ** math.floor(math.log10(x))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * exp >= x:
            return m * exp
    return 10 * exp


def ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / n
    exp = 10 ** math.floor(math.log10(raw))
    step = next(m * exp for m in (1, 2, 2.5, 5, 10) if m * exp >= raw)
    start = math.ceil(lo / step - 1e-9) * step
    out = []
    v = start
    while v <= hi + 1e-9:
        out.append(round(v, 10))
        v += step
    return out


@dataclass
class IntervalRow:
    label: str
    value: float | None
    lo: float | None
    hi: float | None
    color: str = "#4e79a7"
    strong: bool = False  # filled marker + bold label (e.g. interval excludes zero)
    attrs: str = ""


def svg_interval_panels(
    labels: Sequence[str],
    panels: Sequence[tuple[str, Sequence[IntervalRow]]],
    x_min: float,
    x_max: float,
    title: str,
    percent: bool = True,
    zero_line: bool = False,
    width: int = 1100,
    label_w: int | None = None,
    n_cols: int | None = None,
) -> str:
    """Small multiples of point + interval rows; one shared label column, one panel per column.

    ``n_cols`` fixes the panel width as if that many panels were drawn, so wrapped rows of a
    family line up with the full ones.
    """
    label_w = label_w or min(280, 20 + 7 * max([len(truncate(s)) for s in labels] + [8]))
    row_h = 17
    top = 40
    bottom = 30
    n = len(labels)
    gap = 14
    cols = max(1, n_cols or len(panels))
    panel_w = max(120, (width - label_w - gap * (cols - 1)) / cols)
    width = int(label_w + len(panels) * panel_w + gap * (len(panels) - 1)) + 8
    height = top + n * row_h + bottom
    parts = [
        f'<svg class="plot" role="img" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} '
        f'{height}">',
        f"<title>{esc(title)}</title>",
    ]
    for i, lab in enumerate(labels):
        y = top + i * row_h + row_h / 2
        if i % 2 == 0:
            parts.append(f'<rect x="0" y="{top + i * row_h:.1f}" width="{width}" height="{row_h}" fill="#f6f7f9"/>')
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 4:.1f}" text-anchor="end" class="lab">{esc(truncate(lab))}<title>{esc(lab)}</title></text>'
        )
    fmt = (lambda v: f"{100 * v:g}") if percent else (lambda v: f"{v:g}")
    for p, (ptitle, rows) in enumerate(panels):
        x0 = label_w + p * (panel_w + gap)

        def sx(v: float, x0: float = x0) -> float:
            v = min(max(v, x_min), x_max)
            return x0 + 6 + (v - x_min) / (x_max - x_min) * (panel_w - 12)

        parts.append(
            f'<text x="{x0 + panel_w / 2:.1f}" y="16" text-anchor="middle" class="ptitle">{esc(truncate(ptitle, 40))}<title>'
            f"{esc(ptitle)}</title></text>"
        )
        parts.append(f'<rect x="{x0:.1f}" y="{top - 4}" width="{panel_w:.1f}" height="{n * row_h + 8}" fill="none" stroke="#c9ced6"/>')
        for t in ticks(x_min, x_max, 4):
            tx = sx(t)
            parts.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{top - 4}" y2="{top + n * row_h + 4}" stroke="#e3e6ea"/>')
            parts.append(f'<text x="{tx:.1f}" y="{top + n * row_h + 18}" text-anchor="middle" class="tick">{esc(fmt(t))}</text>')
        if zero_line and x_min < 0 < x_max:
            parts.append(
                f'<line x1="{sx(0):.1f}" x2="{sx(0):.1f}" y1="{top - 4}" y2="{top + n * row_h + 4}" stroke="#333" stroke-dasharray="3,3"/>'
            )
        index = {lab: i for i, lab in enumerate(labels)}
        for r in rows:
            if r.label not in index or r.value is None:
                continue
            y = top + index[r.label] * row_h + row_h / 2
            tip = f"{r.label}: {fmt(r.value)}" + (f" [{fmt(r.lo)}, {fmt(r.hi)}]" if r.lo is not None and r.hi is not None else "")
            parts.append(f"<g{r.attrs}><title>{esc(ptitle + ' · ' + tip)}</title>")
            if r.lo is not None and r.hi is not None:
                parts.append(
                    f'<line x1="{sx(r.lo):.1f}" x2="{sx(r.hi):.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{r.color}" stroke-width="2"/>'
                )
                for e in (r.lo, r.hi):
                    parts.append(
                        f'<line x1="{sx(e):.1f}" x2="{sx(e):.1f}" y1="{y - 4:.1f}" y2="{y + 4:.1f}" stroke="{r.color}" stroke-width="1.5"/>'
                    )
            fill = r.color if r.strong or not zero_line else "#fff"
            parts.append(f'<circle cx="{sx(r.value):.1f}" cy="{y:.1f}" r="4" fill="{fill}" stroke="{r.color}" stroke-width="1.5"/></g>')
            if r.value > x_max or (r.hi is not None and r.hi > x_max):
                parts.append(f'<text x="{x0 + panel_w - 4:.1f}" y="{y + 4:.1f}" text-anchor="end" class="tick">→</text>')
    parts.append("</svg>")
    return "".join(parts)


def svg_scatter(
    points: Sequence[tuple[str, float, float, float | None, float | None, str]],
    title: str,
    width: int = 900,
    height: int = 440,
    front: Sequence[str] = (),
    x_name: str = "RTFx",
    x_axis: str = "RTFx (audio seconds per inference second, log scale) → faster",
) -> str:
    """WER (y, with interval bars) against RTFx (x, log scale): (label, rtfx, wer, lo, hi, color).

    ``front``: labels of a Pareto front, joined by a dashed line and ringed (``data-front``);
    ``x_name``/``x_axis`` let the x axis carry another positive figure (cost per audio hour).
    """
    left, right, top, bottom = 64, 170, 24, 46
    xs = [p[1] for p in points]
    ys = [p[4] if p[4] is not None else p[2] for p in points]
    lx0 = math.floor(math.log10(min(xs) * 0.8))
    lx1 = math.ceil(math.log10(max(xs) * 1.25))
    if lx1 == lx0:
        lx1 += 1
    y_max = nice_max(max(ys) * 1.1)

    def sx(v: float) -> float:
        return left + (math.log10(v) - lx0) / (lx1 - lx0) * (width - left - right)

    def sy(v: float) -> float:
        return top + (1 - min(v, y_max) / y_max) * (height - top - bottom)

    parts = [
        f'<svg class="plot" role="img" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} '
        f'{height}">',
        f"<title>{esc(title)}</title>",
    ]
    parts.append(
        f'<rect x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}" fill="#fbfbfc" stroke="#c9ced6"/>'
    )
    for e in range(lx0, lx1 + 1):
        for mult in (1, 2, 5):
            v = mult * 10**e
            if 10**lx0 <= v <= 10**lx1:
                x = sx(v)
                parts.append(
                    f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{height - bottom}" stroke="{"#dde1e6" if mult == 1 else "#eef0f2"}"/>'
                )
                parts.append(f'<text x="{x:.1f}" y="{height - bottom + 16}" text-anchor="middle" class="tick">{v:g}</text>')
    for t in ticks(0, y_max, 5):
        y = sy(t)
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eef0f2"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{100 * t:g}</text>')
    parts.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 8}" text-anchor="middle" class="axis">{esc(x_axis)}</text>')
    on_front = sorted((p for p in points if p[0] in set(front)), key=lambda p: p[1])
    if len(on_front) > 1:
        line = " ".join(f"{sx(p[1]):.1f},{sy(p[2]):.1f}" for p in on_front)
        parts.append(f'<polyline class="front" points="{line}" fill="none" stroke="#333" stroke-dasharray="5,3"/>')
    parts.append(
        f'<text transform="translate(16,{(top + height - bottom) / 2:.0f}) rotate(-90)" text-anchor="middle" class="axis">WER % '
        f"(lower is better)</text>"
    )
    placed: list[tuple[float, float]] = []
    for label, rtfx, wer, lo, hi, color in sorted(points, key=lambda p: p[2]):
        x, y = sx(rtfx), sy(wer)
        show_label = all(abs(y - py) > 11 or abs(x - px) > 150 for px, py in placed)
        if show_label:
            placed.append((x, y))
        mark = attrs(front="yes") if label in front else ""
        x_text = f"{rtfx:.1f}" if x_name == "RTFx" else f"{rtfx:.3g}"
        x_attr = {"rtfx" if x_name == "RTFx" else "x": num_attr(rtfx)}
        parts.append(
            f'<g class="pt"{attrs(model=label, **x_attr, wer=num_attr(wer))}{mark}><title>'
            f"{esc(f'{label}: WER {pct(wer)}% {ci_text([lo, hi])}, {x_name} {x_text}')}</title>"
        )
        if lo is not None and hi is not None:
            parts.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{sy(lo):.1f}" y2="{sy(hi):.1f}" stroke="{color}" stroke-width="2" opacity="0.7"/>'
            )
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{color}" stroke="#222" stroke-width="0.6"/>')
        if mark:
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="8.5" fill="none" stroke="#222" stroke-width="1.2"/>')
        parts.append(
            (f'<text x="{x + 8:.1f}" y="{y + 4:.1f}" class="ptlab">{esc(truncate(label, 28))}</text>' if show_label else "") + "</g>"
        )
    if len(placed) < len(points):
        hidden = len(points) - len(placed)
        parts.append(
            f'<text x="{width - right - 6}" y="{top + 14}" text-anchor="end" class="tick">{hidden} label(s) hidden to avoid '
            f"overlap; hover a point</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


NORMAL = NormalDist()


def svg_det(curves: Sequence[tuple[str, Sequence[float], Sequence[float], str]], title: str, size: int = 420) -> str:
    """DET curve on probit axes: (label, p_fa, p_miss, color)."""
    left, top, pad = 56, 20, 44
    ticks = [0.001, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95]
    lo, hi = NORMAL.inv_cdf(0.0005), NORMAL.inv_cdf(0.9995)

    def s(p: float, flip: bool) -> float:
        p = min(max(p, 0.0005), 0.9995)
        f = (NORMAL.inv_cdf(p) - lo) / (hi - lo)
        return top + (1 - f) * (size - top - pad) if flip else left + f * (size - left - 20)

    parts = [
        f'<svg class="plot" role="img" xmlns="http://www.w3.org/2000/svg" width="{size + 150}" height="{size}" viewBox="0 0 '
        f'{size + 150} {size}">',
        f"<title>{esc(title)}</title>",
    ]
    parts.append(f'<rect x="{left}" y="{top}" width="{size - left - 20}" height="{size - top - pad}" fill="#fbfbfc" stroke="#c9ced6"/>')
    for t in ticks:
        x, y = s(t, False), s(t, True)
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{size - pad}" stroke="#eef0f2"/><text x="{x:.1f}" '
            f'y="{size - pad + 14}" text-anchor="middle" class="tick">{100 * t:g}</text>'
        )
        parts.append(
            f'<line x1="{left}" x2="{size - 20}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eef0f2"/><text x="{left - 4}" y="{y + 4:.1f}" '
            f'text-anchor="end" class="tick">{100 * t:g}</text>'
        )
    parts.append(
        f'<line x1="{s(0.0005, False):.1f}" y1="{s(0.0005, True):.1f}" x2="{s(0.9995, False):.1f}" y2="{s(0.9995, True):.1f}" '
        f'stroke="#bbb" stroke-dasharray="4,3"/>'
    )
    parts.append(f'<text x="{(left + size - 20) / 2:.0f}" y="{size - 8}" text-anchor="middle" class="axis">false-accept rate %</text>')
    parts.append(
        f'<text transform="translate(14,{(top + size - pad) / 2:.0f}) rotate(-90)" text-anchor="middle" class="axis">miss rate %</text>'
    )
    for i, (label, p_fa, p_miss, color) in enumerate(curves):
        pts = " ".join(f"{s(f, False):.1f},{s(m, True):.1f}" for f, m in zip(p_fa, p_miss))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"><title>{esc(label)}</title></polyline>')
        parts.append(
            f'<rect x="{size + 4}" y="{top + 16 * i}" width="10" height="10" fill="{color}"/><text x="{size + 18}" '
            f'y="{top + 9 + 16 * i}" class="ptlab">{esc(truncate(label, 20))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def svg_histogram(
    edges: Sequence[float], target: Sequence[int], nontarget: Sequence[int], title: str, width: int = 520, height: int = 220
) -> str:
    """Target vs non-target score distributions (each normalized to its own total)."""
    left, right, top, bottom = 40, 10, 26, 34
    nt, nn = max(1, sum(target)), max(1, sum(nontarget))
    ft = [c / nt for c in target]
    fn = [c / nn for c in nontarget]
    y_max = max(ft + fn + [1e-9])
    x0, x1 = edges[0], edges[-1]
    span = (x1 - x0) or 1.0

    def sx(v: float) -> float:
        return left + (v - x0) / span * (width - left - right)

    def sy(v: float) -> float:
        return top + (1 - v / y_max) * (height - top - bottom)

    parts = [
        f'<svg class="plot" role="img" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} '
        f'{height}">',
        f"<title>{esc(title)}</title>",
    ]
    for series, color in ((fn, "#e15759"), (ft, "#4e79a7")):
        for i, v in enumerate(series):
            parts.append(
                f'<rect x="{sx(edges[i]):.1f}" y="{sy(v):.1f}" width="{max(0.5, sx(edges[i + 1]) - sx(edges[i]) - 0.5):.1f}" '
                f'height="{sy(0) - sy(v):.1f}" fill="{color}" opacity="0.55"/>'
            )
    for t in ticks(x0, x1, 5):
        parts.append(f'<text x="{sx(t):.1f}" y="{height - bottom + 14}" text-anchor="middle" class="tick">{t:g}</text>')
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{sy(0):.1f}" y2="{sy(0):.1f}" stroke="#888"/>')
    parts.append(
        f'<text x="{width - right}" y="12" text-anchor="end" class="ptlab"><tspan fill="#4e79a7">■ target</tspan> <tspan '
        f'fill="#e15759">■ non-target</tspan></text>'
    )
    parts.append(f'<text x="{(left + width) / 2:.0f}" y="{height - 4}" text-anchor="middle" class="axis">score</text></svg>')
    return "".join(parts)


def heat_color(x: float | None, vmax: float) -> tuple[str, str]:
    """(background, text colour) on a light-yellow → dark-purple ramp; grey for missing."""
    if x is None:
        return "#eceff3", "#555"
    t = max(0.0, min(1.0, x / vmax if vmax > 0 else 0.0))
    stops = [(255, 247, 214), (253, 187, 132), (227, 74, 51), (140, 20, 90), (50, 10, 80)]
    pos = t * (len(stops) - 1)
    i = min(int(pos), len(stops) - 2)
    f = pos - i
    r, g, b = (round(stops[i][k] + (stops[i + 1][k] - stops[i][k]) * f) for k in range(3))
    lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return f"#{r:02x}{g:02x}{b:02x}", ("#000" if lum > 140 else "#fff")


def diverging_color(score: float | None) -> tuple[str, str]:
    """Cohort score colour: red below 100, green above, white at 100 (saturates at ±45)."""
    if score is None:
        return "#eceff3", "#555"
    t = max(-1.0, min(1.0, (score - 100) / 45))
    if t >= 0:
        r, g, b = round(255 - 165 * t), round(255 - 60 * t), round(255 - 165 * t)
    else:
        r, g, b = round(255 + 30 * t), round(255 + 165 * t), round(255 + 165 * t)
    return f"#{r:02x}{g:02x}{b:02x}", "#000"
