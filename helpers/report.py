"""The headline table: every paper number from REFERENCE.md beside the kit's measurement of the same quantity.

    python -m helpers.report --profile cpu      # prints the Markdown table the README shows

It reads only the notebooks' metrics.json files (through `helpers.store`), so the README's numbers are the
committed run's numbers.
"""

from __future__ import annotations

import argparse
import sys

from helpers import store


def _get(profile: str, notebook: str, *keys, default=None):
    try:
        node = store.Run.read_metrics(profile, notebook)
    except FileNotFoundError:
        return default
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return default
        node = node[k]
    return node


def _fmt(x, pct: bool = False, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return x
    return f"{100 * x:.1f} %" if pct else f"{x:.{digits}g}" if abs(x) >= 100 else f"{x:.{digits}f}"


def headline(profile: str = "cpu") -> list[tuple[str, str, str, str]]:
    """(quantity, paper, paper's setting, kit) rows."""
    rows = []
    p04 = "04_step_level_probing"
    rows.append(("RL better than base at matched states", "42.8 %", "FrozenLake",
                 _fmt(_get(profile, p04, "matched_states", "rl_better"), pct=True)))  # fmt: skip
    rows.append(("  (same, DeepCoder-MT)", "46.8 %", "DeepCoder-MT", "not run (cpu tier: FrozenLake only)"))
    rows.append(("Mean step quality, base / RL (matched states)", "RL no better, slightly below", "both",
                 f"{_fmt(_get(profile, p04, 'matched_states', 'mean_quality_base'))} / "
                 f"{_fmt(_get(profile, p04, 'matched_states', 'mean_quality_rl'))}"))  # fmt: skip
    p05 = "05_error_recovery"
    rows.append(("RL picks the superior action after an injected error", "65.7 %", "FrozenLake",
                 _fmt(_get(profile, p05, "superior_action", "rl_better"), pct=True)))  # fmt: skip
    cont = {r["model"]: r["success"] for r in _get(profile, p05, "continuation", default=[])}
    rows.append(("Continuation success from identical error states, RL vs base", "51.3 % vs 38.6 %", "FrozenLake",
                 f"{_fmt(cont.get('rl'), pct=True)} vs {_fmt(cont.get('base'), pct=True)}"))  # fmt: skip
    p06 = "06_likelihood_analysis"
    rows.append(("Per-token NLL under the base policy, RL vs base actions", "12.20 vs 10.25", "Terminal-Bench",
                 f"{_fmt(_get(profile, p06, 'kit', 'nll_base_policy_of_rl_actions'))} vs "
                 f"{_fmt(_get(profile, p06, 'kit', 'nll_base_policy_of_base_actions'))}"))  # fmt: skip
    rows.append(("Cumulative log-likelihood ratio, successful RL vs base trajectories", "≈228 vs ≈26", "Terminal-Bench",
                 f"{_fmt(_get(profile, p06, 'kit', 'cum_llr_successful_rl'))} vs "
                 f"{_fmt(_get(profile, p06, 'kit', 'cum_llr_successful_base'))}"))  # fmt: skip
    p01 = "01_grpo_training"
    rows.append(("Change of R_multi / R_single during GRPO", "+0.331 / −0.097", "DeepCoder-MT",
                 f"{_fmt(_get(profile, p01, 'grpo', 'R_multi_change'))} / "
                 f"{_fmt(_get(profile, p01, 'grpo', 'R_single_change'))}"))  # fmt: skip
    gains = _get(profile, "02_budgetmix_training", "budgetmix_minus_grpo_points", default={})
    paper_gain = {"0.25": "+7.5", "0.5": "+5.3", "0.75": "+4.0", "1": "≈0"}
    for f, paper in paper_gain.items():
        kit = gains.get(f)
        rows.append((f"BudgetMix minus full-budget GRPO at {float(f):.0%} of T_max (points)", paper,
                     "mean of 4 tasks", "n/a" if kit is None else f"{kit:+.1f}"))  # fmt: skip
    return rows


def markdown(profile: str = "cpu") -> str:
    lines = [
        f"| quantity | paper | paper's setting | kit ({profile} tier, FrozenLake) |",
        "|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in headline(profile)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    args = ap.parse_args(argv)
    print(markdown(args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
