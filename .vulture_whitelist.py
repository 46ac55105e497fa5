"""Names that vulture (the dead-code check of `make lint`) cannot see used, each with where it is used.

Made with `vulture helpers scripts benchmarks --min-confidence 60 --make-whitelist` and pruned by hand: what was
really dead was removed from the code instead (issue 49). vulture reads Python files only, so a name that only
notebooks/*.ipynb or tests/ call, or that is called by name at run time, or an attribute a library reads, looks
unused to it. vulture counts a name as used wherever it is read, so this file only has to read each one; it is
never imported or run. `_` stands for any object (for attributes, methods and arguments). A function new in a
notebook's module belongs here when only its notebook calls it; a function nothing calls is deleted.
"""

from benchmarks import speed
from helpers import (
    algos,
    budget_probe,
    budgetmix,
    colourblind,
    config,
    dynamics,
    exercises,
    headroom,
    llr,
    matched,
    nbtools,
    pass_kt,
    recovery,
    stats,
    supervision,
    testbed,
)
from helpers.envs import code
from helpers.envs.sql import spider_sqlite
from helpers.exercises import answers
from helpers.sandbox import uids

_ = object

# Called from the notebooks (notebooks/NN_*.ipynb), which vulture does not read.
NOTEBOOKS = (
    testbed.describe,  # 00
    testbed.map_table,
    testbed.optimal_episode,
    testbed.demonstrator_episode,
    testbed.doorway_section,
    testbed.code_demo_turns,
    testbed.sql_demo_turns,
    code.demo_or_skip,
    dynamics.step_table,  # 01
    dynamics.change_table,
    budgetmix.sharpening_table,  # 02
    budgetmix.success_figure,
    budgetmix.headroom_captured,
    budgetmix.captured_wide,
    budgetmix.r_single_curves,
    budgetmix.doorway_section,
    pass_kt.describe,  # 03
    pass_kt.per_task_k,
    pass_kt.grid_figure,
    pass_kt.pass_at_t_table,
    pass_kt.on_solvable,
    pass_kt.heatmaps,
    pass_kt.doorway_pass,
    pass_kt.doorway_table,
    matched.figures,  # 04
    recovery.superior_table,  # 05
    recovery.concentration_table,
    recovery.figures,
    llr.by_source,  # 06
    llr.nll_summary,
    llr.cumulative,
    llr.llr_summary,
    llr.llr_difference,
    llr.summary_frame,
    llr.Recorded.count_table,
    supervision.train_grid,  # 07
    supervision.describe,
    supervision.dynamics_table,
    supervision.precision_table,
    exercises.paste,  # every notebook's exercises
)

# Tools and references the tests use (a test of something else, not only its own).
TESTS = (
    algos.logprobs_from_logits,  # tests/test_algos.py: log-probabilities of the reference computations
    budget_probe.swapped_prompt,  # tests/test_budget_probe.py
    budget_probe.budget_mixed_states,
    colourblind.delta_e,  # tests/test_plots.py: the palette's colour distances
    config.read_yaml,  # tests/test_series.py
    code.CodeEnv.cached_bytes,  # tests/test_env_code.py, tests/test_attacks.py: the result cache's bound
    headroom.brute_force_blind,  # tests/test_headroom.py, tests/test_map_selection.py: the exact reference
    nbtools.progress_problems,  # tests/test_notebooks.py, tests/test_progress.py
    uids.left_clean,  # tests/test_sandbox.py, tests/test_attacks.py
    stats.paired_nested_bootstrap,  # tests/test_stats_null.py: the alternative the t-interval is checked beside
)

# Called by name at run time.
BY_NAME = (
    speed.case_update,  # benchmarks/speed.py: globals()[f"case_{name}"]
    speed.case_attention,
    speed.case_chunks,
    speed.case_probe,
    speed.case_monitor,
    speed.case_tokenise,
    speed.case_instrument,
    speed.case_plays,
    speed.case_maps,
    speed.case_sweep,
    answers._a00a,  # helpers/exercises/answers.py: READERS, every _aNNx of the module
    answers._a00b,
    answers._a00c,
    answers._a01a,
    answers._a01b,
    answers._a01c,
    answers._a02a,
    answers._a02b,
    answers._a02c,
    answers._a03a,
    answers._a03b,
    answers._a03c,
    answers._a04a,
    answers._a04b,
    answers._a04c,
    answers._a05a,
    answers._a05b,
    answers._a06a,
    answers._a06b,
    answers._a06c,
    answers._a07a,
    answers._a07b,
    answers._a07c,
    spider_sqlite.write_checksums,  # a maintainer's tool, run by hand once per Spider dump
)

# Read by a library or the interpreter: protocol methods, callback and signature arguments, attributes set on
# library objects, and a dataclass field.
LIBRARIES = (
    _.forward,  # helpers/process.py: torch.nn.Module calls it
    _.on_save,  # helpers/train_trl.py: TRL's TrainerCallback
    _.completions,  # helpers/train_trl.py: env_reward's argument, by TRL's reward-function signature
    _.set_description,  # helpers/progress.py: tqdm's interface
    _.mtime,  # helpers/run.py: part of the lru_cache key of _declared
    _.architectures,  # benchmarks/rollout_vllm.py: the saved model's config.json
    _.pre_tokenizer,  # helpers/models.py, helpers/qwen3_tokenizer.py: tokenizers' pipeline
    _.decoder,
    _.ignore_merges,
    _.normalizer,
    _.post_processor,
    _.padding_side,  # transformers' tokenizer
    _.pad_token,
    _.execution_count,  # helpers/nbtools.py: nbformat cells
    _.transport_encryption,  # helpers/nbtools.py: jupyter_client's KernelManager
    _.quit,  # helpers/sandbox/child.py: builtins.quit
    _.__qualname__,  # helpers/sandbox/judge.py
    _.cpu_s,  # helpers/sandbox/base.py: TestResult's field
)

# the groups themselves, read so that vulture sees them used
__all__ = ["BY_NAME", "LIBRARIES", "NOTEBOOKS", "TESTS"]
