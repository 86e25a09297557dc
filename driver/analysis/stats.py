"""Paired statistics for "did this arm beat iter_0?" on the same eval examples.

Both arms are evaluated on the same example ids, so the comparison is paired: only the
discordant examples (right in one arm, wrong in the other) carry information. The test is the
exact McNemar test (a two-sided binomial test of the discordant counts at 1/2); the 95%
interval of the lift is Newcombe's hybrid score interval for a difference of paired proportions
(method 10), which stays inside [-1, 1] and behaves at small counts where a Wald interval does not.

The stochastic draws (seed 003's second measurement, k draws per example) are compared on each
example's mean over its own draws, paired by example (`paired_means`): a paired t-test over the
per-example differences, with its t interval. The draws of one example are not independent of
each other (the same problem), so the example, not the draw, is the unit: n is the examples.
"""
from __future__ import annotations

import math

from driver.analysis.evaluation import wilson_interval

ALPHA = 0.05


def paired(base: dict[str, int], arm: dict[str, int]) -> dict:
    """base/arm: {example_id: 0/1}. Compared on the ids both have."""
    ids = sorted(set(base) & set(arm))
    n = len(ids)
    if n == 0:
        return {"n": 0}
    a = sum(1 for i in ids if base[i] and arm[i])          # both right
    b = sum(1 for i in ids if base[i] and not arm[i])      # lost
    c = sum(1 for i in ids if not base[i] and arm[i])      # gained
    d = n - a - b - c                                      # both wrong
    p1, p2 = (a + b) / n, (a + c) / n
    lift = p2 - p1
    l1, u1 = wilson_interval(a + b, n)
    l2, u2 = wilson_interval(a + c, n)
    # phi: the correlation of the two arms' outcomes, with Newcombe's continuity correction
    # (a positive ad - bc is reduced by n/2, and to zero when it is smaller than that)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    if cross > 0:
        cross = max(0.0, cross - n / 2)
    phi = cross / math.sqrt(denom) if denom else 0.0
    lo = lift - math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    hi = lift + math.sqrt(max(0.0, (u2 - p2) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2))
    p_value = mcnemar_exact(b, c)
    return {"n": n, "gained": c, "lost": b, "lift": lift, "lift_ci": [max(-1.0, lo), min(1.0, hi)],
            "p_value": p_value, "significant": p_value < ALPHA}


def paired_means(base: dict[str, float], arm: dict[str, float]) -> dict:
    """base/arm: {example_id: mean success over its draws}. Compared on the ids both have:
    the lift is the mean per-example difference (equal to the difference of per-draw success
    rates when every example has as many draws), tested by a paired t-test, with its 95%
    t interval. Where every difference is zero there is nothing to test (p = 1)."""
    ids = sorted(set(base) & set(arm))
    n = len(ids)
    if n == 0:
        return {"n": 0}
    diffs = [arm[i] - base[i] for i in ids]
    lift = sum(diffs) / n
    gained, lost = sum(1 for d in diffs if d > 0), sum(1 for d in diffs if d < 0)
    if n < 2 or all(d == diffs[0] for d in diffs):
        # no spread to test against: nothing moved (p = 1), or every example moved alike, where
        # the exact sign test's p is the only one defined
        p_value = 1.0 if lift == 0 or n < 2 else min(1.0, 2 * 0.5 ** n)
        ci = [lift, lift]
    else:
        from scipy.stats import ttest_1samp

        res = ttest_1samp(diffs, 0.0)
        p_value = float(res.pvalue)
        low, high = res.confidence_interval(0.95)
        ci = [max(-1.0, float(low)), min(1.0, float(high))]
    return {"n": n, "gained": gained, "lost": lost, "lift": lift, "lift_ci": ci,
            "p_value": p_value, "significant": p_value < ALPHA, "test": "paired t"}


def mcnemar_exact(b: int, c: int) -> float:
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(min(b, c), b + c, 0.5, alternative="two-sided").pvalue)


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment of several p-values (one per iteration compared with
    iter_0): the k-th smallest is multiplied by (m - k + 1), kept monotone, capped at 1. Used
    when the best iteration is chosen on the same examples its lift is reported on."""
    order = sorted(p_values, key=p_values.get)
    m, out, running = len(order), {}, 0.0
    for k, name in enumerate(order):
        running = max(running, min(1.0, (m - k) * p_values[name]))
        out[name] = running
    return out
