"""The recommended checkpoint's rule: never an arm promoted on a difference the split it is
chosen on cannot resolve. The best iteration is recommended only when it beats iter_0 there by
a paired exact McNemar test at 5%, else iter_0; a control only when it beats that choice the
same way, the controls' p-values Holm-adjusted together. Per-example outcomes are built so each paired test's counts are known."""
from __future__ import annotations

from driver.reporting.summary import recommend


def outcomes(right: int, n: int = 200, first: int = 0) -> dict[str, int]:
    """n examples, `right` of them correct starting at example `first` (wrapping)."""
    return {str(i): int((i - first) % n < right) for i in range(n)}


def arm(name: str, selection: dict[str, int] | None, *, best: bool = False,
        eval_: dict[str, int] | None = None) -> tuple[dict, dict]:
    ev = eval_ or outcomes(120)
    # every arm measured under one setting, as a run records it (eval_config)
    summary = {"eval_acc": sum(ev.values()) / len(ev), "correct_by_example": ev,
               "eval_config": {"temperature": 0.0, "examples": len(ev)}}
    if selection is not None:
        summary["selection"] = {"eval_acc": sum(selection.values()) / len(selection),
                                "n_eval": len(selection), "correct_by_example": selection}
    row = {"arm": name, "best": best, "eval_acc": summary["eval_acc"],
           "selection_acc": None if selection is None else summary["selection"]["eval_acc"]}
    return row, summary


def choose(*arms_):
    rows = [r for r, _ in arms_]
    summaries = {r["arm"]: s for r, s in arms_}
    return recommend(rows, summaries)


def test_a_control_ahead_by_noise_is_not_recommended_nor_an_iteration_ahead_by_noise():
    """The case that promoted an untargeted control: validation 97.5% for run_c against 96.0%
    for iter_1 (n = 200, all-ID50), iter_0 95.5%; none of it resolvable."""
    got = choose(arm("iter_0", outcomes(191)), arm("iter_1", outcomes(192), best=True),
                 arm("run_c", outcomes(195)))
    assert got["arm"] == "iter_0"
    assert got["why"].startswith("the best iteration, iter_1, does not beat it on the selection "
                                 "split beyond noise (+0.5 points (p = 1, n = 200)")


def test_the_best_iteration_is_recommended_when_it_beats_iter0_significantly():
    got = choose(arm("iter_0", outcomes(150)), arm("iter_1", outcomes(175), best=True),
                 arm("run_c", outcomes(178)))
    # iter_1 gains 25 examples, loses none (p = 2 * 0.5^25); run_c's 3 more are noise
    assert got["arm"] == "iter_1"
    assert got["why"] == ("it beats iter_0 on the selection split by +12.5 points (p = 5.96e-08, n = 200), "
                          "on greedy pass@1 (McNemar)")


def test_a_control_is_recommended_only_when_it_beats_the_choice_significantly():
    got = choose(arm("iter_0", outcomes(150)), arm("iter_1", outcomes(175), best=True),
                 arm("run_a", outcomes(176)), arm("run_b", outcomes(195)))
    assert got["arm"] == "run_b"
    assert got["why"].startswith("the control beats iter_1 on the selection split by +10.0 points")


def test_a_loss_is_never_promoted_however_significant():
    got = choose(arm("iter_0", outcomes(180)), arm("iter_1", outcomes(140), best=True))
    assert got["arm"] == "iter_0" and "does not beat it" in got["why"]


def test_without_a_selection_split_the_eval_split_decides_with_holm_over_the_iterations():
    """Chosen where it is reported: the best's p is the Holm-adjusted one (p_holm)."""
    i0, i1, i2 = (arm("iter_0", None, eval_=outcomes(150)), arm("iter_1", None, eval_=outcomes(158)),
                  arm("iter_2", None, best=True, eval_=outcomes(158)))
    i2[0]["p_holm"] = 0.0156   # exact McNemar 0.0078 (8 gained, 0 lost), times 2 iterations
    got = choose(i0, i1, i2)
    assert got["arm"] == "iter_2"
    assert "on the eval split (the env has no selection split) by +4.0 points (p = 0.0156" in got["why"]
    i2[0]["p_holm"] = 0.06
    assert choose(i0, i1, i2)["arm"] == "iter_0"


def test_a_control_measured_under_another_eval_setting_is_never_recommended():
    """Its lift would be the setting's as much as the training's: the same +10 points as the
    control above, but run_b was sampled at temperature 0.7 and the others greedily."""
    row, summary = arm("run_b", outcomes(195))
    summary["eval_config"] = {"temperature": 0.7, "examples": 200}
    got = choose(arm("iter_0", outcomes(150)), arm("iter_1", outcomes(175), best=True),
                 (row, summary))
    assert got["arm"] == "iter_1"


def with_draws(row_summary: tuple[dict, dict], means: dict[str, float]) -> tuple[dict, dict]:
    """The arm with stochastic draws on its selection split (per-example means)."""
    row, summary = row_summary
    summary["selection"]["draws"] = {"acc": sum(means.values()) / len(means), "n": 4 * len(means),
                                     "mean_by_example": means}
    row["selection_draws_acc"] = summary["selection"]["draws"]["acc"]
    return row, summary


def draw_means(up: int, n: int = 200) -> dict[str, float]:
    """n examples at 0.5, the first `up` of them one draw in four higher."""
    return {str(i): 0.75 if i < up else 0.5 for i in range(n)}


def test_on_the_draws_the_paired_t_test_decides_and_the_reason_names_it():
    """Decided on the per-draw success rate: greedy outcomes the same (no McNemar evidence),
    draws up a quarter on 40 of 200 examples (paired t p far below 5%): recommended, and
    the reason names the measurement; the same greedy gain without the draws' is not."""
    from driver.analysis.evaluation import DRAWS

    i0 = with_draws(arm("iter_0", outcomes(150)), draw_means(0))
    i1 = with_draws(arm("iter_1", outcomes(150), best=True), draw_means(40))
    got = recommend([i0[0], i1[0]], {"iter_0": i0[1], "iter_1": i1[1]}, DRAWS)
    assert got["arm"] == "iter_1"
    assert got["why"].startswith("it beats iter_0 on the selection split by +5.0 points (p = ")
    assert got["why"].endswith("on the per-draw success rate (paired t)")
    # greedy ahead by 25 examples (McNemar p < 1e-7) but the draws flat: not on the draws
    i2 = with_draws(arm("iter_1", outcomes(175), best=True), draw_means(0))
    got = recommend([i0[0], i2[0]], {"iter_0": i0[1], "iter_1": i2[1]}, DRAWS)
    assert got["arm"] == "iter_0" and "does not beat it on the selection split beyond noise" in got["why"]


def test_the_controls_are_one_family_a_control_ahead_at_p_003_of_three_is_not_promoted():
    """Three controls are three tests against the choice: at 5% each, one of them passes by
    chance far more often than one in twenty. run_a, the best iteration's own rows trained
    again, gains 6 examples and loses none (exact McNemar p = 0.031): alone it would be
    promoted; beside two other controls its Holm-adjusted p is 0.094, and the iteration stays."""
    i0, i1 = arm("iter_0", outcomes(150)), arm("iter_1", outcomes(175), best=True)
    run_a = arm("run_a", outcomes(181))
    alone = choose(i0, i1, run_a)
    assert alone["arm"] == "run_a" and "(p = 0.0312, n = 200)" in alone["why"]
    got = choose(i0, i1, run_a, arm("run_b", outcomes(170)), arm("run_c", outcomes(174)))
    assert got["arm"] == "iter_1"
    # one far ahead is still promoted, its p adjusted over the three and said so
    got = choose(i0, i1, run_a, arm("run_b", outcomes(195)), arm("run_c", outcomes(174)))
    assert got["arm"] == "run_b"
    assert "Holm-adjusted over the 3 controls compared" in got["why"]
