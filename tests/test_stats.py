"""Paired statistics against hand-computed values."""
from __future__ import annotations

from math import comb

import pytest

from driver.analysis.stats import mcnemar_exact, paired


@pytest.mark.parametrize("b,c", [(0, 6), (1, 9), (4, 4), (3, 12), (0, 0)])
def test_exact_mcnemar_is_the_two_sided_binomial_of_the_discordant_pairs(b, c):
    n, k = b + c, min(b, c)
    expect = 1.0 if n == 0 else min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n)
    assert mcnemar_exact(b, c) == pytest.approx(expect)


def test_paired_counts_lift_and_interval():
    # 100 examples: 30 right in both, 5 lost, 20 gained, 45 wrong in both
    base = {str(i): int(i < 35) for i in range(100)}
    arm = {str(i): int(i < 30 or 35 <= i < 55) for i in range(100)}
    r = paired(base, arm)
    assert (r["n"], r["gained"], r["lost"]) == (100, 20, 5)
    assert r["lift"] == pytest.approx(0.15)
    lo, hi = r["lift_ci"]
    assert -1 <= lo < 0.15 < hi <= 1
    assert r["p_value"] == pytest.approx(2 * sum(comb(25, i) for i in range(6)) / 2 ** 25)
    assert r["significant"] is True
    # the interval narrows as the same discordance is seen on more examples
    big = paired({f"{k}-{j}": v for j in range(4) for k, v in base.items()},
                 {f"{k}-{j}": v for j in range(4) for k, v in arm.items()})
    assert big["lift_ci"][1] - big["lift_ci"][0] < hi - lo


def _pairs(both: int, lost: int, gained: int, neither: int) -> tuple[dict, dict]:
    cells = [(1, 1)] * both + [(1, 0)] * lost + [(0, 1)] * gained + [(0, 0)] * neither
    return ({str(i): b for i, (b, _) in enumerate(cells)}, {str(i): a for i, (_, a) in enumerate(cells)})


def test_newcombe_interval_matches_a_published_worked_example():
    # Complete response before and after consolidation therapy (Cavo et al., 2012), the paired
    # 2x2 example of Fagerland, Lydersen and Laake, "Statistical Analysis of Contingency
    # Tables" (2017), ch. 8: 59 / 6 / 16 / 80, Newcombe's square-and-add interval for the
    # difference before - after = -0.0621 (95% CI -0.1186 to -0.0046). Our lift is after -
    # before, so the same interval with its sign turned.
    r = paired(*_pairs(59, 6, 16, 80))
    assert r["lift"] == pytest.approx(0.0621, abs=5e-5)
    assert r["lift_ci"] == pytest.approx([0.0046, 0.1186], abs=5e-5)
    # the other direction is the mirror image: a sign error in either bound fails one of these
    r = paired(*_pairs(59, 16, 6, 80))
    assert r["lift_ci"] == pytest.approx([-0.1186, -0.0046], abs=5e-5)


def test_no_discordance_is_no_evidence_and_only_shared_ids_count():
    base = {"a": 1, "b": 0, "c": 1}
    r = paired(base, {"a": 1, "b": 0, "c": 1, "z": 1})
    assert r["n"] == 3 and r["lift"] == 0 and r["p_value"] == 1.0 and r["significant"] is False
    assert r["lift_ci"][0] < 0 < r["lift_ci"][1]
    assert paired({"a": 1}, {"b": 1}) == {"n": 0}


def test_holm_matches_a_worked_example():
    # Holm (1979) step-down: sorted p = .01, .02, .03, .04 over m = 4 tests ->
    # .01*4 = .04, .02*3 = .06, .03*2 = .06 (monotone), .04*1 = .04 -> raised to .06
    from driver.analysis.stats import holm

    got = holm({"iter_1": 0.03, "iter_2": 0.01, "iter_3": 0.04, "iter_4": 0.02})
    assert got == pytest.approx({"iter_2": 0.04, "iter_4": 0.06, "iter_1": 0.06, "iter_3": 0.06})
    assert holm({"iter_1": 0.6, "iter_2": 0.7}) == {"iter_1": 1.0, "iter_2": 1.0}   # capped at 1


def test_draw_means_are_compared_by_a_paired_t_test_over_examples():
    from driver.analysis.stats import paired_means

    base = {str(i): [0.0, 0.25, 0.5, 0.75, 1.0][i % 5] for i in range(200)}
    # every example gains one draw in four where it can: a per-draw lift of 0.2 over 200 examples
    arm = {k: min(1.0, v + 0.25) for k, v in base.items()}
    got = paired_means(base, arm)
    assert got["n"] == 200 and got["lift"] == pytest.approx(0.2) and got["lost"] == 0
    assert got["significant"] and got["lift_ci"][0] < 0.2 < got["lift_ci"][1]
    # the lift is the difference of per-draw success rates (equal draws per example)
    assert got["lift"] == pytest.approx(sum(arm.values()) / 200 - sum(base.values()) / 200)
    # noise: half the examples up a draw, half down, is no evidence
    mixed = {k: v + (0.25 if int(k) % 2 else -0.25) for k, v in base.items() if 0 < v < 1}
    got = paired_means({k: base[k] for k in mixed}, mixed)
    assert abs(got["lift"]) < 0.02 and not got["significant"]
    assert paired_means(base, base)["p_value"] == 1.0 and paired_means({}, base) == {"n": 0}
