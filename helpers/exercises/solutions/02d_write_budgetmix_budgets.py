import math

import pandas as pd

from helpers import config, fmt
from helpers.exercises import checks


def my_budgetmix_budgets(t_max: int) -> list[int]:
    """The sorted distinct BudgetMix budgets: max(1, f * t_max rounded half up) for f = 0.1, 0.2, ..., 1.0."""
    return sorted(
        {max(1, math.floor(i / 10 * t_max + 0.5)) for i in range(1, 11)}
    )  # not round(): half to even


verdict_d = checks.budgetmix_candidates(my_budgetmix_budgets)
print(verdict_d)
if (
    verdict_d.passed
):  # then look at the profile's T_max: which fractions share a budget, and what a draw gives
    conf_d = config.load(profile)
    top_d = conf_d.env.frozenlake.t_max
    budgets_d = my_budgetmix_budgets(top_d)
    shares_d = {
        T: [f"{i / 10:.1f}" for i in range(1, 11) if max(1, math.floor(i / 10 * top_d + 0.5)) == T]
        for T in budgets_d
    }
    print(
        f"T_max = {top_d}: {len(budgets_d)} distinct budgets; BudgetMix draws each with probability 1/{len(budgets_d)}"
    )
    print(
        fmt.table(
            pd.DataFrame({"fractions of T_max": {T: ", ".join(f) for T, f in shares_d.items()}}).rename_axis(
                "budget"
            ),
        ).to_string()
    )
    print(
        f"mean budget / T_max: {sum(budgets_d) / len(budgets_d) / top_d:.3f} drawn over the distinct budgets, "
        "0.550 over the ten fractions"
    )
