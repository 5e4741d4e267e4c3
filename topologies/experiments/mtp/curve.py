"""The dissertation's treatment of throughput-against-loss observations (section 7.2, tplot in
Appendix C, Figure 14): averages per loss bin, the 1-2-4-2-1 smoothing of neighbouring bins,
and an exponential fit (Excel's exponential trend line: least squares on the logarithm)."""
from __future__ import annotations

import math

#: tplot's weights for a bin and its two neighbours each side
WEIGHTS = (1, 2, 4, 2, 1)


def bin_means(points: list[tuple[float, float]], width: float) -> dict[float, tuple[float, int]]:
    """Mean y per bin of x (bins centred on multiples of `width`) and how many points each."""
    by: dict[float, list[float]] = {}
    for x, y in points:
        by.setdefault(round(x / width) * width, []).append(y)
    return {k: (sum(v) / len(v), len(v)) for k, v in sorted(by.items())}


def smooth(bins: dict[float, float], width: float) -> dict[float, float]:
    """Each bin averaged with its neighbours at ±1 and ±2 bins, weights 1-2-4-2-1, over the
    neighbours that have a value (the weights of missing ones drop out)."""
    out = {}
    for x in bins:
        num = den = 0.0
        for k, w in zip(range(-2, 3), WEIGHTS):
            y = bins.get(round((x + k * width) / width) * width)
            if y is not None:
                num, den = num + w * y, den + w
        out[x] = num / den
    return out


def exp_fit(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(a, b) of y = a·exp(b·x) by least squares on ln y over the points with y > 0; None
    with fewer than two distinct x."""
    pts = [(x, math.log(y)) for x, y in points if y > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    n = len(pts)
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    b = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return math.exp(my - b * mx), b
