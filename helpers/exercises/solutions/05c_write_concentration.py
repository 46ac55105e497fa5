import pandas as pd

from helpers import config, fmt, store
from helpers.exercises import checks


def my_concentration(error_states: pd.DataFrame, matched_states: pd.DataFrame, a: str, b: str) -> list[float]:
    """Per RL seed (column `rl_seed`, sorted): the share of live states (`dead` False) where column a beats column b
    by more than 1e-9, at the error states minus at the matched states."""

    def win_rate(table: pd.DataFrame) -> float:
        live = table[~table["dead"].astype(bool)]
        return float(((live[a] - live[b]) > 1e-9).mean())

    return [
        win_rate(error_states[error_states["rl_seed"] == s])
        - win_rate(matched_states[matched_states["rl_seed"] == s])
        for s in sorted(error_states["rl_seed"].unique())
    ]


conf_d = config.load(profile)
errors_d = store.Run.read_table(conf_d.results_name, "05_error_recovery", "error_state_quality")
matched_d = store.Run.read_table(conf_d.results_name, "04_step_level_probing", "per_state_quality")
verdict_d = checks.concentration(my_concentration, errors_d, matched_d)
print(verdict_d)
if verdict_d.passed:  # then yours per seed, beside the notebook's verdict (t-interval over the seeds)
    noted_d = store.Run.read_metrics(conf_d.results_name, "05_error_recovery")["concentration"]
    rows_d = {}
    for a_d, b_d in (("rl", "base"), ("rl", "sharp")):
        mine_d = my_concentration(errors_d, matched_d, a_d, b_d)
        paired_d = noted_d[f"{a_d}_vs_{b_d}"]["paired"]  # None with one seed
        rows_d[f"{a_d} vs {b_d}"] = {
            "yours per seed (points)": fmt.joined([100 * v for v in mine_d], digits=1),
            "yours, mean (points)": 100 * sum(mine_d) / len(mine_d),
            "notebook's verdict (points)": fmt.verdict(paired_d, scale=100) if paired_d else "one seed",
        }
    print("Win rate at error states minus at matched states, per RL seed:")
    print(fmt.table(pd.DataFrame(rows_d).T.rename_axis("comparison"), digits=1).to_string())
