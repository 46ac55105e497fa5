"""InterCode-SQL on SQLite: answer a question about a Spider database by querying it, then `submit`.

The protocol is InterCode's (intercode-bench 0.1.22, `SqlEnv`). Each turn the agent sends one SQL query (or
`submit`); the observation is the query's rows (at most `show_rows` shown, with how many there were), a note that
the result was empty, or `Error executing query: ...`. `submit` scores the *last* result against the gold query's
result with InterCode's reward (`intercode_reward`): the multiset IoU of the stringified rows, times Kendall's tau
between the shared rows as they occur in the two results when tau is defined, rounded to 2 decimals. The episode
ends on `submit` or when the budget runs out; **running out of turns without submitting scores the last result
as if it had been submitted** (`info["submitted"]` says which happened, so a trainer that wants BudgetMix's zero
reward for unfinished trajectories can apply it). `submit` itself uses a turn. Success means reward 1.

Queries run on read-only SQLite connections guarded four ways: the URI's `mode=ro`; `PRAGMA query_only`; an
authorizer callback that allows only reading (SELECT, recursive CTEs, functions other than `load_extension`, and a
few schema PRAGMAs such as `table_info`) and so refuses writes, ATTACH (also `VACUUM INTO`, which attaches) and
PRAGMA writes; and a limit of zero attached databases. Every query has a time limit enforced by a progress handler
(a runaway recursive CTE or a huge join is stopped; fetching is covered too), counted in CPU time of the thread
running it so that a busy machine changes no reward (a wall-clock stall guard 30 times as large only stops a query
on a starved machine, and says so); the model's queries run in a query worker process (`engine.QueryWorker`,
`worker.py`) under a kernel CPU-time limit of 2 x the limit + 0.5 s, which ends the straight-line work inside one
row that SQLite never interrupts (issue 52: 2400 `instr()` calls in one row ran 46 s); a row cap and a byte cap (`max_result_bytes`, the text and blob lengths kept;
rows beyond either are dropped and the observation says so); values are capped at `SQLITE_LIMIT_LENGTH`. The reward
step compares only what the caps kept, so it is bounded as well (`SELECT zeroblob(1000000) FROM city LIMIT 300`
keeps 4 rows). Refusals are ordinary error observations.

Tasks (`source="bundled"`, the default, offline): the 20 Spider dev databases from intercode-bench's MySQL
dump, converted to SQLite (`spider_sqlite.py`), and the 23 sample questions the wheel ships with their gold queries
(`assets/datasets/sql_queries.csv`) on 8 of them: 20 databases, 23 questions. Task ids are `sql-sample00` ..
`sql-sample22`, the row of the sample in that file; the file's SHA-256 is checked (`SAMPLES_SHA256`), so the ids
cannot shift silently. All 23 are kept, also the three whose gold answer is empty on SQLite (`sql-sample00` and
`sql-sample05` ask for pets_1 students with both a cat and a dog, and no student has both; `sql-sample12` reads
wta_1, whose tables the dump leaves empty): any query that returns no rows scores 1 on them.

Train and test are disjoint by database, as in Spider. `TEST_DBS` holds out five dev databases (about a fifth of
Spider's dev questions), fixed whatever task list is loaded, so a question is in the same split in the samples and
in a larger list; two of them hold samples, so offline the test split is the 10 samples on pets_1 (8) and
battle_death (2) and the train split the 13 on the other 6 databases; both are non-empty.

A larger task list on the same databases: on a networked box, fetch InterCode's `data/sql/spider/ic_spider_dev.json`
(princeton-nlp/intercode) or Spider's `dev.json`, build a task file with `write_task_file(questions, path)` into a
folder of your choice (not inside this package; nothing fetched is bundled) and load it with
`load_tasks(split, tasks_file=path)`; a profile or `-p` naming it (`env.extra.intercode_sql.tasks_file`) must put it
in one of the kit's data folders (`data/`, the results folder, or a folder listed in `$KIT_DATA`;
`config.data_roots()`), any other path is refused. It keeps the questions whose answer the dump's data supports (the gold query
runs on SQLite, reads no empty table and returns rows; an empty answer would reward any empty query). Some Spider
questions fail that rule because SQLite compares strings exactly where InterCode's MySQL collation ignores case and
trailing spaces, and all of wta_1's fail it. `source="hub"` (networked box) loads Spider's own SQLite files and its
train / dev questions from the Hugging Face hub instead, with the same support rule; Spider's train and dev
databases are disjoint.

`step_quality(action)` is the reward the action's result would get if submitted next (for `submit`, the reward of
the current last result). Rollouts record it, but it is **not a step oracle** (`step_oracle = False`), so step
probing and error recovery (notebooks 04, 05) skip InterCode-SQL, as the paper does. An oracle of a step's quality
must score what the step is worth for the rest of the episode (FrozenLake's Q*; on DeepCoder-MT every reply is a
whole candidate program, so its pass rate is what that reply would score). The reward of the current result scores
each query as if the episode ended after it: it is the step's value only on the last turn. Earlier, a query that
reads the data to learn how values are spelled or which table holds a fact scores 0 although it may be the best
step, while a query that is nearly right in the final columns scores high; and since only the *last* result is
scored, an injected wrong query is undone by any later query, so "recovering from an error" is no different from
answering from a fresh state. The exact value of an action (the best reward still reachable after it) is 1 at every
state with a turn left (the gold query can always be run next), so it cannot rank steps either.
"""

from helpers.envs.sql import spider_sqlite
from helpers.envs.sql.data import (
    HUB_DATABASES,
    HUB_QUESTIONS,
    HUB_SPLITS,
    SAMPLES_SHA256,
    TEST_DBS,
    dump_databases,
    empty_tables,
    gold_support,
    hub_databases,
    hub_tasks,
    read_questions,
    read_task_file,
    sample_tasks,
    split_records,
    write_task_file,
)
from helpers.envs.sql.engine import (
    SAFE_PRAGMAS,
    QueryResult,
    ReadOnlyDatabase,
    gold_result,
    render_result,
)
from helpers.envs.sql.env import DEMO_TASK, DEMO_WRONG, SYSTEM_PROMPT, SQLEnv, demo, parse_action
from helpers.envs.sql.reward import intercode_reward

__all__ = [
    "DEMO_TASK",
    "DEMO_WRONG",
    "HUB_DATABASES",
    "HUB_QUESTIONS",
    "HUB_SPLITS",
    "SAFE_PRAGMAS",
    "SAMPLES_SHA256",
    "SYSTEM_PROMPT",
    "TEST_DBS",
    "QueryResult",
    "ReadOnlyDatabase",
    "SQLEnv",
    "demo",
    "dump_databases",
    "empty_tables",
    "gold_result",
    "gold_support",
    "hub_databases",
    "hub_tasks",
    "intercode_reward",
    "parse_action",
    "read_questions",
    "read_task_file",
    "render_result",
    "sample_tasks",
    "spider_sqlite",
    "split_records",
    "write_task_file",
]
