"""InterCode-SQL's reward: a result's rows against the gold query's rows (multiset IoU times Kendall's tau)."""

from __future__ import annotations

import math
import warnings
from collections import Counter

from scipy.stats import kendalltau


def _shared_in_order(items: list[str], shared: Counter) -> list[str]:
    """The items of `items` that belong to the multiset `shared`, in their order, each as often as shared."""
    left = Counter(shared)
    out = []
    for item in items:
        if left[item] > 0:
            left[item] -= 1
            out.append(item)
    return out


def intercode_reward(result: object, gold: object) -> float:
    """InterCode-SQL's reward for a result against the gold result (both lists of row tuples).

    Rows are compared as strings (`str(row)`), as multisets: IoU = |intersection| / |union| with counts (both
    empty: 1). When they share rows, the shared rows are listed in the order each result gives them and IoU is
    multiplied by Kendall's tau-b between these two lists (scipy, ranking the strings), rounded to 2 decimals;
    where tau is undefined (one shared row, or all alike) IoU is kept unrounded. A result that is not a list (an
    error message, no result yet) scores 0. Tau can be negative, so the reward lies in [-1, 1].
    """
    if not isinstance(result, list) or not isinstance(gold, list):
        return 0.0
    agent = [str(row) for row in result]
    ref = [str(row) for row in gold]
    count_agent, count_ref = Counter(agent), Counter(ref)
    shared = count_agent & count_ref
    union = count_agent | count_ref
    if not union:
        return 1.0
    reward = sum(shared.values()) / sum(union.values())
    if shared:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns where tau is undefined (NaN); that case is handled
            tau = kendalltau(
                _shared_in_order(agent, shared), _shared_in_order(ref, shared), nan_policy="omit"
            )
        if not math.isnan(tau.statistic):
            reward = round(float(tau.statistic) * reward, 2)
    return float(reward)
