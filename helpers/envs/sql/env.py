"""The InterCode-SQL environment: one SQL query (or `submit`) per turn against a read-only database, scored by
InterCode's reward on `submit` or when the turns run out; and the scripted demo of notebook 00."""

from __future__ import annotations

import re
import time
from pathlib import Path

from helpers.budget import statement
from helpers.envs.base import StepResult, Task, check_split, oversized, seeded_subset
from helpers.envs.sql.data import TEST_DBS, dump_databases, hub_databases, split_records
from helpers.envs.sql.engine import ReadOnlyDatabase, gold_result, render_result
from helpers.envs.sql.reward import intercode_reward

_FENCE = re.compile(r"```[ \t]*(?:sql|sqlite)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)

SYSTEM_PROMPT = (
    "You answer questions about a SQLite database by querying it. Each turn, reply with exactly one SQL query "
    "(SQLite dialect, read-only) in a ```sql code block; you will see its result. When your last result answers "
    "the question, reply with the single word submit. Your last result is scored against the correct answer's "
    "rows: extra, missing or wrongly ordered rows lower the score."
)


def parse_action(text: str) -> tuple[str | None, str]:
    """The SQL (or 'submit') in a reply: the last ```sql block if there is one, else the whole reply.

    Returns (None, why) for an empty reply. `submit` is recognised case-insensitively, with or without a
    trailing semicolon, alone in the reply or in the block. A reply over `MAX_REPLY_BYTES` is refused unread.
    """
    too_long = oversized(text)
    if too_long:
        return None, too_long
    blocks = _FENCE.findall(text)
    sql = (blocks[-1] if blocks else text).strip()
    if not sql:
        return None, "empty reply" if not blocks else "empty code block"
    if sql.rstrip(";").strip().lower() == "submit":
        return "submit", ""
    return sql, ""


class SQLEnv:
    """InterCode-SQL on SQLite with a turn budget; implements `helpers.envs.base.Env`."""

    name = "intercode_sql"
    step_oracle = False
    oracle_note = (
        "the reward of the current result scores each query as if the episode ended after it (a step's value only "
        "on the last turn; exploratory queries score 0), and an error is undone by the next query since only the "
        "last result is scored: not a sound step oracle (see helpers/envs/sql.py)"
    )

    def __init__(
        self,
        time_limit_s: float = 2.0,
        row_cap: int = 10_000,
        show_rows: int = 20,
        show_schema: bool = True,
        max_result_bytes: int = 4 << 20,
    ):
        """`time_limit_s` bounds each query's CPU time (fetching included); `row_cap` and `max_result_bytes` bound what a
        query's result may hold, and so what the observation and the reward step work on."""
        if show_rows < 1 or time_limit_s <= 0 or row_cap < 1 or max_result_bytes < 1:
            raise ValueError(
                f"SQLEnv settings: show_rows={show_rows}, row_cap={row_cap} and max_result_bytes="
                f"{max_result_bytes} must be at least 1, time_limit_s={time_limit_s} above 0"
            )
        self.time_limit_s = float(time_limit_s)
        self.row_cap = int(row_cap)
        self.max_result_bytes = int(max_result_bytes)
        self.show_rows = int(show_rows)
        self.show_schema = bool(show_schema)
        self.db: ReadOnlyDatabase | None = None
        self.task: Task | None = None
        self.done = True

    # -- tasks --------------------------------------------------------------------------------------------
    @classmethod
    def load_tasks(
        cls,
        split: str,
        n: int | None = None,
        source: str = "bundled",
        seed: int = 0,
        *,
        t_max: int = 10,
        test_dbs: tuple[str, ...] | list[str] = TEST_DBS,
        tasks_file: str | Path | None = None,
    ) -> list[Task]:
        """Tasks of one split, disjoint from the other by database; with `n`, a seeded subset in stored order.

        `source="bundled"` loads the wheel's 23 samples, or with `tasks_file` a task list built by
        `write_task_file` (same databases, same split rule); `source="hub"` loads Spider from the hub."""
        check_split(split)
        if t_max < 1:
            raise ValueError(f"t_max={t_max} must be at least 1")
        if tasks_file is not None and source != "bundled":
            raise ValueError(f"tasks_file applies to source='bundled' (the dump's databases), not {source!r}")
        db_source = "dump" if source == "bundled" else "hub"
        return [
            Task(
                task_id=r["id"],
                env=cls.name,
                payload={
                    "db": r["db"],
                    "db_source": db_source,
                    "question": r["question"],
                    "gold": r["gold"],
                    "hardness": r.get("hardness"),
                    "origin": r.get("origin", "spider"),
                },
                t_max=t_max,
            )
            for r in seeded_subset(split_records(split, source, test_dbs, tasks_file), n, seed)
        ]

    @staticmethod
    def upper_bound(task: Task, budget: int) -> float:
        """1.0 for any budget >= 1: running the gold query on the last turn scores 1 (budget end scores it)."""
        return 1.0 if budget >= 1 else 0.0

    @staticmethod
    def database_path(task: Task) -> Path:
        """The SQLite file a task runs on."""
        db, src = task.payload["db"], task.payload.get("db_source", "dump")
        paths = dump_databases() if src == "dump" else hub_databases()
        if db not in paths:
            raise KeyError(f"database {db!r} not among the {len(paths)} {src} databases")
        return paths[db]

    # -- episode ------------------------------------------------------------------------------------------
    def reset(self, task: Task, budget: int, seed: int = 0) -> list[dict]:
        """Open the task's database read-only, run the gold query once, and state question, schema and budget."""
        if budget < 1:
            raise ValueError(f"budget must be at least 1, got {budget}")
        path = self.database_path(task)
        if self.db is None or self.db.path != path:
            if self.db is not None:
                self.db.close()
            self.db = ReadOnlyDatabase(  # the model's queries run in the query worker, ended from outside
                path, self.time_limit_s, self.row_cap, max_result_bytes=self.max_result_bytes, isolated=True
            )
        self.task = task
        self.gold = gold_result(self.db, task.payload["gold"])
        self.last: list[tuple] | str | None = None  # InterCode: no result yet scores 0
        self.total = self.remaining = int(budget)
        self.t = 0
        self.done = False
        lines = [f"Database: {task.payload['db']}"]
        if self.show_schema:
            lines.append("Tables:")
            lines += [f"  {table}({', '.join(cols)})" for table, cols in self.db.schema().items()]
        lines += [f"Question: {task.payload['question']}", statement(self.total, self.remaining)]
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(lines)}]

    def step(self, action_text: str) -> StepResult:
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        sql, why = parse_action(action_text)
        self.t += 1
        self.remaining -= 1
        info: dict = {"invalid": sql is None, "t": self.t, "remaining": self.remaining, "submitted": False}
        if sql == "submit":
            reward = intercode_reward(self.last, self.gold)
            self.done = True
            info.update(submitted=True, result_reward=reward)
            return StepResult(f"Submitted. Reward: {reward:g}.", reward, True, reward == 1.0, info)
        if sql is None:
            note = f"Invalid action: {why}. Reply with one SQL query in a ```sql block, or submit."
        else:
            res = self.db.run(sql)
            self.last = res.value
            note = render_result(res, self.show_rows)
            info.update(
                error=res.error is not None,
                refused=res.refused,
                timed_out=res.timed_out,
                stalled=res.stalled,
                rows=None if res.rows is None else len(res.rows),
                truncated=res.truncated,
                capped_by=res.capped_by,
                seconds=round(res.seconds, 4),
                cpu_seconds=round(res.cpu_seconds, 4),
            )
        info["result_reward"] = intercode_reward(self.last, self.gold)
        if self.remaining == 0:  # out of turns: the last result is scored as if submitted
            reward = info["result_reward"]
            self.done = True
            return StepResult(
                f"{note}\nOut of turns: your last result was scored (reward {reward:g}).",
                reward,
                True,
                reward == 1.0,
                info,
            )
        return StepResult(f"{note}\n{statement(self.total, self.remaining)}", 0.0, False, False, info)

    # -- oracle -------------------------------------------------------------------------------------------
    def step_quality(self, action_text: str) -> float | None:
        """The reward the action's result would get on submit (submit: the current last result's reward);
        0 for an invalid action. Runs the query read-only; the episode's state does not change."""
        if self.done:
            raise RuntimeError("step_quality() on a finished episode")
        sql, _ = parse_action(action_text)
        if sql is None:
            return 0.0
        if sql == "submit":
            return intercode_reward(self.last, self.gold)
        return intercode_reward(self.db.run(sql).value, self.gold)

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None


# ------------------------------------------------------------------------------------------------------ demo


DEMO_TASK = "sql-sample02"  # pets_1 (test split): the major and age of students who do not have a cat
DEMO_WRONG = "SELECT Major, Age FROM Student"  # forgets to leave out the cat owners


def demo(task_id: str = DEMO_TASK, wrong_query: str = DEMO_WRONG, budget: int = 5) -> dict:
    """A scripted player on one bundled task: a wrong query, read its result, then the gold query, then submit.

    Returns the transcript (chat messages), per-turn records (action, reward, step quality), the final reward,
    and how many databases and tasks load."""
    t0 = time.perf_counter()
    paths = dump_databases()
    ready_s = time.perf_counter() - t0
    train, test = SQLEnv.load_tasks("train"), SQLEnv.load_tasks("test")
    task = next((t for t in train + test if t.task_id == task_id), None)
    if task is None:
        raise KeyError(f"no bundled task {task_id!r}")
    env = SQLEnv()
    messages = env.reset(task, budget=budget)
    actions = [f"```sql\n{wrong_query}\n```", f"```sql\n{task.payload['gold']}\n```", "submit"]
    turns = []
    for action in actions:
        quality = env.step_quality(action)
        res = env.step(action)
        messages += [{"role": "assistant", "content": action}, {"role": "user", "content": res.observation}]
        turns.append(
            {
                "action": action,
                "reward": res.reward,
                "step_quality": quality,
                "done": res.done,
                "success": res.success,
            }
        )
        if res.done:
            break
    env.close()
    return {
        "task_id": task.task_id,
        "question": task.payload["question"],
        "transcript": messages,
        "turns": turns,
        "reward": turns[-1]["reward"],
        "success": turns[-1]["success"],
        "n_databases": len(paths),
        "n_tasks": {"train": len(train), "test": len(test)},
        "databases_ready_s": round(ready_s, 3),
    }
