"""SVG charts lay their labels out so that no two texts meet (by the widths the charts estimate;
tests/report/test_report_browser.py measures the real ones in Chromium)."""

import re
from itertools import pairwise

from ragray.report import svg


def tick_texts(chart):
    """(x, [lines]) of every category/x tick label."""
    out = []
    for x, body in re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="middle" class="tick">(.*?)</text>', chart):
        lines = re.findall(r"<tspan[^>]*>(.*?)</tspan>", body) or [re.sub(r"<title>.*", "", body)]
        out.append((float(x), lines))
    return out


def test_many_ranks_are_thinned_and_long_labels_wrapped_to_their_slot():
    ranks = [str(r) for r in range(1, 51)]
    chart = svg.bars(ranks, [svg.Series("mean influence", range(50), [1 / r for r in range(1, 51)])],
                     title="t", xlabel="retrieval rank", ylabel="mean influence")
    shown = tick_texts(chart)
    assert 5 <= len(shown) < 50 and shown[0][1] == ["1"]
    for (a, la), (b, lb) in pairwise(shown):
        assert b - a >= (svg.text_width(la[0], 10) + svg.text_width(lb[0], 10)) / 2
    labels = ["drop-one log-prob", "retrieval rank*", "answer–passage embedding similarity*", "random*"]
    chart = svg.bars(labels, [svg.Series("a", range(4), [0.5] * 4), svg.Series("b", range(4), [0.4] * 4)],
                     title="Finding the gold passage", xlabel="measure (* control)", ylabel="share / AUC", ymax=1)
    shown = tick_texts(chart)
    slot = shown[1][0] - shown[0][0]
    assert all(svg.text_width(line, 10) <= slot - 6 for _, lines in shown for line in lines)
    rows = max(len(lines) for _, lines in shown)
    assert rows >= 3
    axis_y = float(re.search(r'<line x1="[\d.]+" y1="([\d.]+)"', chart).group(1))
    xtitle_y = float(re.search(r'<text x="[\d.]+" y="([\d.]+)" text-anchor="middle" class="axis">', chart).group(1))
    last_line_bottom = axis_y + 16 + 12 * (rows - 1) + 3
    assert xtitle_y - 11 > last_line_bottom  # the axis title sits below the last row of labels


def test_wide_tick_labels_and_titles_make_room():
    chart = svg.bars(["a", "b"], [svg.Series("s", [0, 1], [0.0125, 0.075])], title="x" * 90, xlabel="k",
                     ylabel="share")
    assert int(re.search(r'width="(\d+)"', chart).group(1)) >= svg.text_width("x" * 90, 12, bold=True)
    x0 = float(re.search(r'<line x1="([\d.]+)"', chart).group(1))
    widest = max(svg.text_width(t, 10) for t in re.findall(r'text-anchor="end" class="tick">([^<]+)<', chart))
    assert x0 - 6 - widest >= 16  # clear of the rotated y-axis title
