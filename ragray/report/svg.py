"""Small, dependency-free SVG charts for reports and the dashboard (inline, offline, no JS).

Each function returns one ``<svg>`` element as a string, sized in CSS pixels, with a ``<title>`` per
mark (the browser shows it on hover) and ``data-*`` attributes carrying the plotted numbers, so
tests can read back what was drawn. Colours follow one small palette; text uses the page's font.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

__all__ = ["PALETTE", "Series", "bars", "bubbles", "histogram", "lines", "text_width"]

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563")
_W, _H = 420, 260
_M = {"left": 48, "right": 12, "top": 26, "bottom": 40}
# font sizes in CSS px of the classes the page styles (.chart-title, .axis, .tick)
_TITLE, _AXIS, _TICK = 12, 11, 10
_LINE = 12  # px between the lines of a wrapped tick label


@dataclass(frozen=True)
class Series:
    name: str
    x: Sequence[float]
    y: Sequence[float]


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _num(v: float) -> str:
    return f"{v:.4g}"


_NARROW = set("ijlt.,:;'|!()[] ")
_WIDE = set("mwMW@%—–")


def text_width(text: str, size: float, bold: bool = False) -> float:
    """An upper estimate of ``text``'s width in px at ``size`` px: charts place labels by it, as
    the browser's font is not known here (em widths of DejaVu Sans, the widest common fallback)."""
    em = sum(0.35 if c in _NARROW else 0.95 if c in _WIDE else 0.72 if c.isupper() or c.isdigit() else 0.62
             for c in str(text))
    return em * size * (1.1 if bold else 1.0)


def _fit(text: str, width: float, size: float, bold: bool = False) -> str:
    """``text``, cut with an ellipsis to fit ``width`` px (the full text stays in a tooltip)."""
    if text_width(text, size, bold) <= width:
        return text
    while text and text_width(text + "…", size, bold) > width:
        text = text[:-1]
    return text.rstrip() + "…"


def _wrap(text: str, width: float, size: float, max_lines: int = 4) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` px; a word too long for a line
    is broken after its dashes, and a piece still too long is cut (so is the last line, past
    ``max_lines``)."""
    lines: list[str] = []
    for word in str(text).split():
        if lines and text_width(lines[-1] + " " + word, size) <= width:
            lines[-1] += " " + word
            continue
        pieces = [word] if text_width(word, size) <= width else re.findall(r"[^-–—]+[-–—]?|[-–—]", word)
        for i, piece in enumerate(pieces):
            if i and text_width(lines[-1] + piece, size) <= width:
                lines[-1] += piece
            else:
                lines.append(_fit(piece, width, size))
    if len(lines) > max_lines:
        lines = lines[:max_lines - 1] + [_fit(" ".join(lines[max_lines - 1:]), width, size)]
    return lines or [""]


def _category_lines(labels: Sequence[str], slot: float) -> list[list[str]]:
    """Tick labels of ``len(labels)`` categories ``slot`` px apart that never touch: one line each
    when they fit; else short labels (ranks, K) thinned to every n-th, long ones wrapped."""
    room = slot - 6
    widths = [text_width(label, _TICK) for label in labels]
    if all(w <= room for w in widths):
        return [[str(label)] for label in labels]
    if all(" " not in str(label) and len(str(label)) <= 4 for label in labels):
        step = math.ceil((max(widths) + 6) / slot)
        return [[str(label)] if i % step == 0 else [] for i, label in enumerate(labels)]
    return [_wrap(str(label), room, _TICK) for label in labels]


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for mult in (1, 2, 2.5, 5, 10):
        if (hi - lo) / (step * mult) <= n:
            step *= mult
            break
    first = math.ceil(lo / step - 1e-9) * step
    out, v = [], first
    while v <= hi + 1e-9 * step:
        out.append(round(v, 10))
        v += step
    return out


class _Frame:
    """Axes mapping data to pixels, with the axis lines, ticks and labels drawn once.

    The margins follow the labels so that no two texts overlap: the left one the widest y tick
    label, the bottom one the rows of the category labels (``categories``, wrapped to their slot);
    the chart widens to its title; axis titles longer than their axis are cut (full text on hover).
    """

    def __init__(self, title: str, xlim: tuple[float, float], ylim: tuple[float, float], xlabel: str,
                 ylabel: str, kind: str, width: int = _W, height: int = _H, legend: bool = False,
                 yticks: Sequence[float] = (), categories: Sequence[str] = ()) -> None:
        width = max(width, math.ceil(text_width(title, _TITLE, bold=True)) + 16)
        self.w, self.h = width, height
        tick_w = max((text_width(_num(v), _TICK) for v in yticks), default=0)
        self.x0, self.x1 = max(_M["left"], math.ceil(tick_w) + 28), width - _M["right"]
        self.cat_lines: list[list[str]] = []
        if categories:
            self.cat_lines = _category_lines(categories, (self.x1 - self.x0) / len(categories))
        rows = max((len(lines) for lines in self.cat_lines), default=1)
        self.h = height = height + (rows - 1) * _LINE
        self.y0, self.y1 = height - _M["bottom"] - (rows - 1) * _LINE, _M["top"] + (16 if legend else 0)
        self.xlim, self.ylim = xlim, ylim
        xtitle = _fit(xlabel, self.x1 - self.x0, _AXIS)
        ytitle = _fit(ylabel, self.y0 - self.y1, _AXIS)
        self.parts = [
            (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-kind="{kind}" '
             f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             f'aria-label="{_esc(title)}"><title>{_esc(title)}</title>'),
            f'<text x="{width / 2}" y="16" text-anchor="middle" class="chart-title">{_esc(title)}</text>',
            f'<line x1="{self.x0}" y1="{self.y0}" x2="{self.x1}" y2="{self.y0}" stroke="#9ca3af"/>',
            f'<line x1="{self.x0}" y1="{self.y0}" x2="{self.x0}" y2="{self.y1}" stroke="#9ca3af"/>',
            (f'<text x="{(self.x0 + self.x1) / 2}" y="{height - 6}" text-anchor="middle" class="axis">'
             f'{_esc(xtitle)}<title>{_esc(xlabel)}</title></text>'),
            (f'<text transform="translate(13 {(self.y0 + self.y1) / 2}) rotate(-90)" text-anchor="middle" '
             f'class="axis">{_esc(ytitle)}<title>{_esc(ylabel)}</title></text>'),
        ]
        if yticks:
            self.yticks(yticks)

    def px(self, x: float) -> float:
        lo, hi = self.xlim
        return self.x0 + (x - lo) / ((hi - lo) or 1) * (self.x1 - self.x0)

    def py(self, y: float) -> float:
        lo, hi = self.ylim
        return self.y0 - (y - lo) / ((hi - lo) or 1) * (self.y0 - self.y1)

    def xticks(self, values: Sequence[float]) -> None:
        """Numeric ticks (thinned to every n-th label where their labels would touch)."""
        labels = [_num(v) for v in values]
        gap = min((abs(self.px(b) - self.px(a)) for a, b in pairwise(values)), default=self.x1 - self.x0)
        step = max(1, math.ceil((max((text_width(t, _TICK) for t in labels), default=0) + 6) / (gap or 1)))
        for i, v in enumerate(values):
            x = self.px(v)
            self.parts.append(f'<line x1="{x:.1f}" y1="{self.y0}" x2="{x:.1f}" y2="{self.y0 + 4}" stroke="#9ca3af"/>')
            if i % step == 0:
                self.parts.append(f'<text x="{x:.1f}" y="{self.y0 + 16}" text-anchor="middle" class="tick">'
                                  f'{_esc(labels[i])}</text>')

    def categories(self, labels: Sequence[str]) -> None:
        """One label under the middle of each category slot (as laid out in the constructor)."""
        for i, (label, lines) in enumerate(zip(labels, self.cat_lines)):
            x = self.px(i + 0.5)
            self.parts.append(f'<line x1="{x:.1f}" y1="{self.y0}" x2="{x:.1f}" y2="{self.y0 + 4}" stroke="#9ca3af"/>')
            if not lines:
                continue
            spans = "".join(f'<tspan x="{x:.1f}" dy="{0 if j == 0 else _LINE}">{_esc(line)}</tspan>'
                            for j, line in enumerate(lines))
            hover = f"<title>{_esc(label)}</title>" if lines != [str(label)] else ""
            self.parts.append(f'<text x="{x:.1f}" y="{self.y0 + 16}" text-anchor="middle" class="tick">'
                              f'{spans}{hover}</text>')

    def yticks(self, values: Sequence[float]) -> None:
        for v in values:
            y = self.py(v)
            self.parts.append(f'<line x1="{self.x0 - 4}" y1="{y:.1f}" x2="{self.x1}" y2="{y:.1f}" stroke="#e5e7eb"/>'
                              f'<text x="{self.x0 - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_num(v)}</text>')

    def legend(self, names: Sequence[str]) -> None:
        x = self.x0 + 8
        for i, name in enumerate(names):
            color = PALETTE[i % len(PALETTE)]
            self.parts.append(f'<rect x="{x}" y="{self.y1 - 15}" width="10" height="10" fill="{color}"/>'
                              f'<text x="{x + 14}" y="{self.y1 - 6}" class="tick">{_esc(name)}</text>')
            x += 24 + math.ceil(text_width(name, _TICK))

    def empty(self, message: str) -> str:
        self.parts.append(f'<text x="{self.w / 2}" y="{self.h / 2}" text-anchor="middle" class="axis">'
                          f'{_esc(message)}</text>')
        return self.done()

    def done(self) -> str:
        return "".join(self.parts) + "</svg>"


def histogram(values: Sequence[float], *, title: str, xlabel: str, lo: float, hi: float, bins: int = 10,
              marker: float | None = None, marker_label: str = "") -> str:
    """Counts of ``values`` in ``bins`` equal bins over [lo, hi] (values outside are clipped in)."""
    counts = [0] * bins
    for v in values:
        i = int((min(max(v, lo), hi) - lo) / ((hi - lo) or 1) * bins)
        counts[min(i, bins - 1)] += 1
    top = max(counts) if counts else 0
    yticks = [t for t in _ticks(0, max(1, top)) if float(t).is_integer()] if values else []
    labelled = marker is not None and lo <= marker <= hi and bool(marker_label)
    f = _Frame(title, (lo, hi), (0, max(1, top)), xlabel, "questions", "histogram", yticks=yticks, legend=labelled)
    if not values:
        return f.empty("nothing measured")
    f.xticks(_ticks(lo, hi))
    width = (hi - lo) / bins
    for i, c in enumerate(counts):
        a, b = lo + i * width, lo + (i + 1) * width
        x, y = f.px(a), f.py(c)
        f.parts.append(f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{f.px(b) - x - 2:.1f}" height="{f.y0 - y:.1f}" '
                       f'fill="{PALETTE[0]}" data-lo="{_num(a)}" data-hi="{_num(b)}" data-count="{c}">'
                       f'<title>{_num(a)} to {_num(b)}: {c}</title></rect>')
    if marker is not None and lo <= marker <= hi:
        x = f.px(marker)
        right = x > (f.x0 + f.x1) / 2  # label on the side with room, in the row above the bars
        f.parts.append(f'<line x1="{x:.1f}" y1="{f.y0}" x2="{x:.1f}" y2="{f.y1 - (14 if labelled else 0)}" stroke="{PALETTE[1]}" '
                       f'stroke-dasharray="4 3" data-marker="{_num(marker)}"/>')
        if labelled:
            f.parts.append(f'<text x="{x - 4 if right else x + 4:.1f}" y="{f.y1 - 5}" class="tick" '
                           f'text-anchor="{"end" if right else "start"}" style="fill:{PALETTE[1]}">{_esc(marker_label)}</text>')
    return f.done()


def bars(labels: Sequence[str], groups: Sequence[Series], *, title: str, xlabel: str, ylabel: str,
         ymax: float | None = None, errors: Sequence[Sequence[tuple[float, float] | None]] | None = None) -> str:
    """Grouped bars: one group per label, one bar per series (``Series.y`` aligned with ``labels``);
    ``errors[s][i]`` an optional (low, high) interval drawn as a whisker."""
    values = [v for g in groups for v in g.y if v is not None]
    top = ymax if ymax is not None else max([*values, *(e[1] for es in errors or [] for e in es if e)], default=1)
    f = _Frame(title, (0, len(labels)), (0, top or 1), xlabel, ylabel, "bars", legend=len(groups) > 1,
               yticks=_ticks(0, top or 1) if labels else [], categories=labels)
    if not labels:
        return f.empty("no data")
    f.categories(labels)
    slot = (f.px(1) - f.px(0)) * 0.8 / max(1, len(groups))
    for s, g in enumerate(groups):
        color = PALETTE[s % len(PALETTE)]
        for i, v in enumerate(g.y):
            if v is None:
                continue
            x = f.px(i + 0.1) + s * slot
            y = f.py(v)
            f.parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot - 1:.1f}" height="{f.y0 - y:.1f}" '
                           f'fill="{color}" data-series="{_esc(g.name)}" data-label="{_esc(labels[i])}" '
                           f'data-value="{_num(v)}"><title>{_esc(g.name)} {_esc(labels[i])}: {_num(v)}</title></rect>')
            band = errors[s][i] if errors and errors[s] else None
            if band:
                cx = x + (slot - 1) / 2
                f.parts.append(f'<line x1="{cx:.1f}" y1="{f.py(band[0]):.1f}" x2="{cx:.1f}" y2="{f.py(band[1]):.1f}" '
                               'stroke="#111827"/>')
    if len(groups) > 1:
        f.legend([g.name for g in groups])
    return f.done()


def lines(series: Sequence[Series], *, title: str, xlabel: str, ylabel: str,
          xlim: tuple[float, float] | None = None, ylim: tuple[float, float] = (0.0, 1.0)) -> str:
    """One polyline with points per series."""
    xs = [x for s in series for x in s.x]
    f = _Frame(title, xlim or ((min(xs), max(xs)) if xs else (0, 1)), ylim, xlabel, ylabel, "lines", legend=True,
               yticks=_ticks(*ylim) if xs else [])
    if not xs:
        return f.empty("no curve")
    f.xticks(_ticks(*f.xlim))
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = " ".join(f"{f.px(x):.1f},{f.py(y):.1f}" for x, y in zip(s.x, s.y))
        f.parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2" '
                       f'data-series="{_esc(s.name)}"/>')
        for x, y in zip(s.x, s.y):
            f.parts.append(f'<circle cx="{f.px(x):.1f}" cy="{f.py(y):.1f}" r="3" fill="{color}">'
                           f'<title>{_esc(s.name)}: {_num(x)}, {_num(y)}</title></circle>')
    f.legend([s.name for s in series])
    return f.done()


def bubbles(counts: dict[tuple[int, int], int], n: int, *, title: str, xlabel: str, ylabel: str) -> str:
    """A ``n`` × ``n`` grid of circles sized by how often (x, y) occurred, with the diagonal."""
    ticks = [t for t in _ticks(1, n) if float(t).is_integer()] if counts else []
    f = _Frame(title, (0.5, n + 0.5), (n + 0.5, 0.5), xlabel, ylabel, "bubbles", height=_W - 60, yticks=ticks)
    if not counts:
        return f.empty("nothing measured")
    f.xticks(ticks)
    f.parts.append(f'<line x1="{f.px(0.5):.1f}" y1="{f.py(0.5):.1f}" x2="{f.px(n + 0.5):.1f}" '
                   f'y2="{f.py(n + 0.5):.1f}" stroke="{PALETTE[2]}" stroke-dasharray="4 3"/>')
    top = max(counts.values())
    cell = (f.px(1) - f.px(0)) / 2
    for (x, y), c in sorted(counts.items()):
        r = max(1.5, cell * math.sqrt(c / top))
        f.parts.append(f'<circle cx="{f.px(x):.1f}" cy="{f.py(y):.1f}" r="{r:.1f}" fill="{PALETTE[0]}" '
                       f'fill-opacity="0.6" data-x="{x}" data-y="{y}" data-count="{c}">'
                       f'<title>retrieval rank {x}, influence rank {y}: {c}</title></circle>')
    return f.done()
