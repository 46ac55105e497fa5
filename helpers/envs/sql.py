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
authorizer callback that allows only reading (SELECT, recursive CTEs, functions other than `load_extension`,
and a few schema PRAGMAs such as `table_info`) and so refuses writes, ATTACH (also `VACUUM INTO`, which attaches)
and PRAGMA writes; and a limit of zero attached databases. Every query has a time limit enforced by a progress
handler (a runaway recursive CTE or a huge join is stopped; fetching is covered too), a row cap and a byte cap
(`max_result_bytes`, the text and blob lengths kept; rows beyond either are dropped and the observation says so);
values are capped at `SQLITE_LIMIT_LENGTH`. The reward step compares only what the caps kept, so it is bounded as
well (`SELECT zeroblob(1000000) FROM city LIMIT 300` keeps 4 rows). Refusals are ordinary error observations.

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
`load_tasks(split, tasks_file=path)`. It keeps the questions whose answer the dump's data supports (the gold query
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

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import math
import re
import sqlite3
import time
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import numpy as np
from scipy.stats import kendalltau

from helpers.budget import statement
from helpers.envs import spider_sqlite
from helpers.envs.base import StepResult, Task

# SHA-256 of intercode-bench 0.1.22's assets/datasets/sql_queries.csv: the 23 samples, whose row numbers are ids.
SAMPLES_SHA256 = "39462538167795ca93fbf23b0277d70d700eadd49f934df8d2b74770985bf99b"

# Spider dev databases held out for the test split (about a fifth of Spider's dev questions, five domains of
# different sizes; pets_1 and battle_death hold 10 of the 23 samples); all others are train. Fixed here so the
# split never depends on which task list is loaded or how many tasks are asked for.
TEST_DBS = ("concert_singer", "pets_1", "car_1", "employee_hire_evaluation", "battle_death")

HUB_QUESTIONS = (
    "xlangai/spider"  # parquet: db_id, query, question; splits train (Spider train) and validation
)
HUB_DATABASES = ("xlangai/spider", "data/spider.zip", "177e69f41c5e57dff0a01b4066fdddf819bbb534")
HUB_SPLITS = {"train": "train", "test": "validation"}

SAFE_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list"}
)
_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}
_AUTHORIZER_CODES = """CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER
    CREATE_TEMP_VIEW CREATE_TRIGGER CREATE_VIEW DELETE DROP_INDEX DROP_TABLE DROP_TEMP_INDEX DROP_TEMP_TABLE
    DROP_TEMP_TRIGGER DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW INSERT PRAGMA READ SELECT TRANSACTION UPDATE ATTACH
    DETACH ALTER_TABLE REINDEX ANALYZE CREATE_VTABLE DROP_VTABLE FUNCTION SAVEPOINT RECURSIVE"""
_ACTION_NAMES = {getattr(sqlite3, f"SQLITE_{n}"): n.replace("_", " ") for n in _AUTHORIZER_CODES.split()}
_FENCE = re.compile(r"```[ \t]*(?:sql|sqlite)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)

SYSTEM_PROMPT = (
    "You answer questions about a SQLite database by querying it. Each turn, reply with exactly one SQL query "
    "(SQLite dialect, read-only) in a ```sql code block; you will see its result. When your last result answers "
    "the question, reply with the single word submit. Your last result is scored against the correct answer's "
    "rows: extra, missing or wrongly ordered rows lower the score."
)


# ------------------------------------------------------------------------------------------------ the reward


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


# ----------------------------------------------------------------------------------- read-only query running


@dataclass
class QueryResult:
    """What one query produced: rows (None where the statement returns no result set) or an error."""

    rows: list[tuple] | None
    columns: list[str]
    error: str | None = None
    truncated: bool = False  # more rows than the row cap, or more bytes than the byte cap: only a prefix kept
    capped_by: str | None = None  # "rows" or "bytes": which cap cut the result
    refused: bool = False  # the guard refused the statement (a write, ATTACH, a PRAGMA write, ...)
    timed_out: bool = False
    seconds: float = 0.0
    tables_read: frozenset[str] = frozenset()

    @property
    def value(self) -> list[tuple] | str | None:
        """What InterCode's reward sees: the rows, the error message, or None."""
        return self.error if self.error is not None else self.rows


class ReadOnlyDatabase:
    """A read-only connection to one SQLite file with a per-query time limit, a row cap and a byte cap (the sum
    of the sizes of the values kept; what reaches the observation and the reward is bounded by both)."""

    def __init__(
        self,
        path: Path,
        time_limit_s: float = 2.0,
        row_cap: int = 10_000,
        max_value_bytes: int = 1 << 20,
        max_result_bytes: int = 4 << 20,
    ):
        if time_limit_s <= 0 or row_cap < 1 or max_result_bytes < 1:
            raise ValueError(
                f"time_limit_s={time_limit_s} must be > 0, row_cap={row_cap} and "
                f"max_result_bytes={max_result_bytes} at least 1"
            )
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no database file at {self.path}")
        self.time_limit_s = float(time_limit_s)
        self.row_cap = int(row_cap)
        self.max_result_bytes = int(max_result_bytes)
        self.con = sqlite3.connect(
            f"file:{quote(str(self.path.resolve()))}?mode=ro",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=0,  # re-prepare every query, so the authorizer sees (and records) each one
        )
        self.con.execute("PRAGMA query_only = 1")
        self.con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        self.con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, int(max_value_bytes))
        self.con.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 100_000)
        self._refusal: str | None = None
        self._reads: set[str] = set()
        self._deadline = math.inf
        self.con.set_authorizer(self._authorize)
        self.con.set_progress_handler(self._over_time, 1000)

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
    ) -> int:
        if action == sqlite3.SQLITE_READ and arg1:
            self._reads.add(arg1.lower())
        if action in _ALLOWED_ACTIONS and not (
            action == sqlite3.SQLITE_FUNCTION and arg2 == "load_extension"
        ):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in SAFE_PRAGMAS:
            return sqlite3.SQLITE_OK
        name = _ACTION_NAMES.get(action, f"action {action}")
        what = f"PRAGMA {arg1}" if action == sqlite3.SQLITE_PRAGMA else name
        if action == sqlite3.SQLITE_FUNCTION:
            what = f"function {arg2}"
        self._refusal = self._refusal or f"{what} is not allowed: the database is read-only"
        return sqlite3.SQLITE_DENY

    def _over_time(self) -> int:
        return int(time.monotonic() > self._deadline)

    def run(self, sql: str, time_limit_s: float | None = None) -> QueryResult:
        """Run one statement; never raises for a bad query (the error is in the result)."""
        self._refusal, self._reads = None, set()
        limit = self.time_limit_s if time_limit_s is None else float(time_limit_s)
        start = time.monotonic()
        self._deadline = start + limit
        cur = self.con.cursor()
        try:
            cur.execute(sql)
            columns = [d[0] for d in cur.description] if cur.description else []
            rows: list[tuple] | None = None
            truncated, capped_by, size = False, None, 0
            if cur.description is not None:
                rows = []
                for row in cur:  # one row at a time; the progress handler stops a slow step
                    size += _row_bytes(row)
                    if len(rows) >= self.row_cap or size > self.max_result_bytes:
                        truncated, capped_by = True, "rows" if len(rows) >= self.row_cap else "bytes"
                        break
                    rows.append(row)
            return QueryResult(
                rows,
                columns,
                truncated=truncated,
                capped_by=capped_by,
                seconds=time.monotonic() - start,
                tables_read=frozenset(self._reads),
            )
        except (sqlite3.Error, ValueError, OverflowError) as err:  # ValueError: a NUL character in the SQL
            msg, refused, timed_out = str(err), False, False
            if self._refusal is not None:
                msg, refused = f"not authorized: {self._refusal}", True
            elif isinstance(err, sqlite3.OperationalError) and msg == "interrupted":
                msg, timed_out = f"query stopped: it ran past the {limit:g} s time limit", True
            return QueryResult(
                None,
                [],
                error=msg,
                refused=refused,
                timed_out=timed_out,
                seconds=time.monotonic() - start,
                tables_read=frozenset(self._reads),
            )
        finally:
            cur.close()
            self._deadline = math.inf

    def schema(self) -> dict[str, list[str]]:
        """Table -> column names, in the database's order (sqlite_* internal tables left out)."""
        names = self.run(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        )
        out = {}
        for (name,) in names.rows or []:
            info = self.run(f"PRAGMA table_info(`{name}`)")
            out[name] = [row[1] for row in info.rows or []]
        return out

    def close(self) -> None:
        self.con.close()


def _row_bytes(row: tuple) -> int:
    """What a row costs against the byte cap: text and blob lengths, 8 bytes for any other value."""
    return sum(len(v) if isinstance(v, str | bytes) else 8 for v in row)


def _row_text(row: tuple, max_chars: int) -> str:
    """repr(row) cut to `max_chars`, without first building the repr of a huge value."""
    cut = tuple(v[: max_chars + 1] if isinstance(v, str | bytes) else v for v in row)
    text = repr(cut)
    return text if len(text) <= max_chars and cut == row else text[: max_chars - 3] + "..."


def render_result(res: QueryResult, show_rows: int = 20, max_chars: int = 200) -> str:
    """The observation for one query: rows (the first `show_rows`, saying how many), empty, or the error."""
    if res.error is not None:
        return f"Error executing query: {res.error}"
    if res.rows is None:
        return "The statement ran and returned no result set."
    if not res.rows and res.truncated:
        return f"The first row is larger than the byte cap; no rows were kept (columns: {', '.join(res.columns)})."
    if not res.rows:
        return f"Empty result: 0 rows (columns: {', '.join(res.columns)})."
    n = len(res.rows)
    if res.truncated and res.capped_by == "bytes":
        head = f"The result is larger than the byte cap; only the first {n} row{'s were' if n != 1 else ' was'} kept"
    elif res.truncated:
        head = f"More than {n} rows; only the first {n} were kept (row cap)"
    else:
        head = f"{n} row{'s' if n != 1 else ''}"
    if n > show_rows:
        head += f"; showing the first {show_rows}"
    lines = [f"{head} (columns: {', '.join(res.columns)}):"]
    lines += [_row_text(row, max_chars) for row in res.rows[:show_rows]]
    if n > show_rows:
        lines.append(f"... {n - show_rows} more rows not shown.")
    return "\n".join(lines)


def parse_action(text: str) -> tuple[str | None, str]:
    """The SQL (or 'submit') in a reply: the last ```sql block if there is one, else the whole reply.

    Returns (None, why) for an empty reply. `submit` is recognised case-insensitively, with or without a
    trailing semicolon, alone in the reply or in the block.
    """
    blocks = _FENCE.findall(text)
    sql = (blocks[-1] if blocks else text).strip()
    if not sql:
        return None, "empty reply" if not blocks else "empty code block"
    if sql.rstrip(";").strip().lower() == "submit":
        return "submit", ""
    return sql, ""


# -------------------------------------------------------------------------------------------------- the data


@functools.lru_cache(maxsize=1)
def dump_databases() -> dict[str, Path]:
    """The 20 converted Spider dev databases (built and checked once per process)."""
    return spider_sqlite.ensure_databases()


def hub_cache_dir() -> Path:
    return spider_sqlite.cache_root() / "spider_hub"


def _hub_error(what: str, err: Exception) -> RuntimeError:
    return RuntimeError(
        f"source='hub' could not load {what} from the Hugging Face hub ({type(err).__name__}: {err}). It needs "
        "network access and the `datasets` package; offline, use source='bundled' (the Spider dev databases "
        "converted from intercode-bench's dump)."
    )


@functools.lru_cache(maxsize=1)
def hub_databases() -> dict[str, Path]:
    """Spider's own SQLite files (all 166 train + 20 dev databases), downloaded once and unpacked into the cache."""
    folder = hub_cache_dir() / "database"
    marker = hub_cache_dir() / "unpacked.json"
    if not marker.is_file():
        try:
            from huggingface_hub import hf_hub_download

            repo, filename, revision = HUB_DATABASES
            archive = hf_hub_download(repo, filename, repo_type="dataset", revision=revision)
        except Exception as err:
            raise _hub_error("Spider's SQLite databases", err) from err
        found = {}
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                m = re.search(r"(?:^|/)database/([^/]+)/\1\.sqlite$", member)
                if m:
                    target = folder / m.group(1) / f"{m.group(1)}.sqlite"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(member))
                    found[m.group(1)] = spider_sqlite.sha256_file(target)
        if not found:
            raise RuntimeError(f"{filename} at {revision} holds no database/<db>/<db>.sqlite files")
        marker.write_text(json.dumps(found, indent=1, sort_keys=True))
    found = json.loads(marker.read_text())
    return {db: folder / db / f"{db}.sqlite" for db in found}


def hub_tasks(split: str) -> list[dict]:
    """Spider's questions of one split whose answers its databases support (same rule as the bundled tasks),
    as task records; the verdicts are cached next to the databases."""
    questions = _hub_questions(split)
    paths = hub_databases()
    cache = hub_cache_dir() / f"support-{split}.json"
    key = hashlib.sha256(json.dumps(questions, sort_keys=True).encode()).hexdigest()
    saved = json.loads(cache.read_text()) if cache.is_file() else {}
    if saved.get("key") != key:
        verdicts, open_dbs = [], {}
        for q in questions:
            if q["db"] not in paths:
                verdicts.append("database missing")
                continue
            if q["db"] not in open_dbs:
                db = ReadOnlyDatabase(paths[q["db"]])
                open_dbs[q["db"]] = (db, empty_tables(db))
            db, empty = open_dbs[q["db"]]
            verdicts.append(gold_support(db, q["gold"], empty))
        for db, _ in open_dbs.values():
            db.close()
        saved = {"key": key, "verdicts": verdicts}
        cache.write_text(json.dumps(saved))
    return [
        dict(q, id=f"spider-{split}{i:05d}", origin="spider")
        for i, (q, why) in enumerate(zip(questions, saved["verdicts"], strict=True))
        if why is None
    ]


def _hub_questions(split: str) -> list[dict]:
    try:
        import datasets  # lazily: only the hub source needs it
    except ImportError as err:
        raise _hub_error("Spider's questions", err) from err
    try:
        rows = datasets.load_dataset(HUB_QUESTIONS, split=HUB_SPLITS[split])
    except Exception as err:
        raise _hub_error("Spider's questions", err) from err
    return [{"db": r["db_id"], "question": r["question"], "gold": r["query"]} for r in rows]


def empty_tables(db: ReadOnlyDatabase) -> set[str]:
    """The tables of a database that hold no rows."""
    return {t for t in db.schema() if not db.run(f"SELECT 1 FROM `{t}` LIMIT 1").rows}


def gold_support(db: ReadOnlyDatabase, gold: str, empty_tables: set[str]) -> str | None:
    """Why a gold query's answer is not supported by the database's data (None if it is): it fails on SQLite,
    reads an empty table (the dump has no rows for wta_1), or returns no rows (any empty query would score 1)."""
    res = db.run(gold, time_limit_s=10.0)
    if res.error is not None:
        return f"error: {res.error}"
    if res.tables_read & {t.lower() for t in empty_tables}:
        return f"reads an empty table: {sorted(res.tables_read & {t.lower() for t in empty_tables})}"
    if not res.rows:
        return "empty answer"
    return None


@functools.lru_cache(maxsize=1)
def sample_tasks() -> tuple[dict, ...]:
    """The 23 sample tasks the intercode-bench wheel ships (`assets/datasets/sql_queries.csv`: question, gold SQL,
    database), as task records `sql-sample00` .. `sql-sample22` in the file's row order; the file is checked
    against `SAMPLES_SHA256` so the ids always name the same questions."""
    path = spider_sqlite.intercode_file(*spider_sqlite.SAMPLES_RELPATH)
    got = spider_sqlite.sha256_file(path)
    if got != SAMPLES_SHA256:
        raise ValueError(
            f"{path} has SHA-256 {got}, expected {SAMPLES_SHA256} ({spider_sqlite.INTERCODE_PIN}); the sample "
            "task ids would not name the same questions"
        )
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    return tuple(
        {
            "id": f"sql-sample{k:02d}",
            "db": r["db"],
            "question": r["query"].strip(),
            "gold": r["gold"].strip(),
            "origin": "sample",
        }
        for k, r in enumerate(rows)
    )


def _squash(text: str) -> str:
    return " ".join(text.split())


def read_questions(path: str | Path) -> tuple[list[dict], str]:
    """The questions of InterCode's `ic_spider_dev.json` (records `db`, `query` = the question, `gold` = SQL,
    `hardness`) or of Spider's `dev.json` (records `db_id`, `question`, `query` = SQL), as records `db`,
    `question`, `gold`, `hardness` (None for Spider); also names the format found."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list) or not data or not all(isinstance(r, dict) for r in data):
        raise ValueError(f"{path}: expected a non-empty JSON list of question records")
    formats = {
        "intercode": ({"db", "query", "gold"}, lambda r: (r["db"], r["query"], r["gold"], r.get("hardness"))),
        "spider": ({"db_id", "question", "query"}, lambda r: (r["db_id"], r["question"], r["query"], None)),
    }
    for name, (keys, get) in formats.items():
        if keys <= set(data[0]):
            out = []
            for i, r in enumerate(data):
                if not keys <= set(r):
                    raise ValueError(f"{path}: record {i} lacks {sorted(keys - set(r))} ({name} format)")
                db, question, gold, hardness = get(r)
                out.append(
                    {"db": db, "question": question.strip(), "gold": gold.strip(), "hardness": hardness}
                )
            return out, name
    raise ValueError(
        f"{path}: record 0 has keys {sorted(data[0])}; expected InterCode's (db, query, gold) or Spider's "
        "(db_id, question, query)"
    )


def write_task_file(questions: str | Path, path: str | Path) -> dict:
    """Build a larger task list for `load_tasks(..., tasks_file=path)` from Spider dev questions (InterCode's
    `data/sql/spider/ic_spider_dev.json` or Spider's `dev.json`, fetched by the user on a networked box).

    Keeps the questions whose answer the dump's data supports (`gold_support`: the gold query runs on SQLite,
    reads no empty table, returns rows; questions on databases outside the dump are left out too). A question that
    is one of the wheel's samples (same database and question text, first occurrence) keeps its sample id and the
    wheel's text and is kept whatever its answer, as in the bundled set; any other question `i` of the source file
    becomes `sql-dev{i:04d}`. `path` must lie outside the `helpers` package: fetched data is never bundled.
    Returns the record written (tasks, and the excluded questions with the reason)."""
    path = Path(path)
    package = Path(__file__).resolve().parents[1]
    if path.resolve().is_relative_to(package):
        raise ValueError(
            f"write_task_file: {path} is inside the helpers package; write task lists elsewhere (fetched data "
            "is not shipped with the kit)"
        )
    raw = Path(questions).read_bytes()
    dev, fmt = read_questions(questions)
    samples = {(s["db"], _squash(s["question"])): s for s in sample_tasks()}
    paths = dump_databases()
    dbs: dict[str, tuple[ReadOnlyDatabase, set[str]]] = {}
    tasks, excluded, used = [], [], set()
    for i, q in enumerate(dev):
        sample = samples.get((q["db"], _squash(q["question"])))
        if sample is not None and sample["id"] not in used:
            used.add(sample["id"])
            tasks.append(dict(sample, hardness=q["hardness"]))
            continue
        if q["db"] not in paths:
            excluded.append({"index": i, "db": q["db"], "reason": "database not in the dump"})
            continue
        if q["db"] not in dbs:
            db = ReadOnlyDatabase(paths[q["db"]])
            dbs[q["db"]] = (db, empty_tables(db))
        db, empty = dbs[q["db"]]
        why = gold_support(db, q["gold"], empty)
        if why is not None:
            excluded.append({"index": i, "db": q["db"], "reason": why})
            continue
        tasks.append({"id": f"sql-dev{i:04d}", **q, "origin": "dev"})
    for db, _ in dbs.values():
        db.close()
    record = {
        "about": "InterCode-SQL tasks on the 20 Spider dev databases converted from intercode-bench 0.1.22's dump: "
        "the questions of the source file whose gold query runs on the SQLite conversion, reads no empty table and "
        "returns rows, and any of the wheel's 23 samples among them (ids sql-sampleNN). Built by "
        "helpers.envs.sql.write_task_file.",
        "license": "Spider (Yu et al., EMNLP 2018) is CC BY-SA 4.0; InterCode (Yang et al., 2023) is MIT.",
        "source": {"file": Path(questions).name, "format": fmt, "sha256": hashlib.sha256(raw).hexdigest()},
        "dump_sha256": spider_sqlite.expected_checksums()["dump_sha256"],
        "n_questions": len(dev),
        "excluded": excluded,
        "tasks": tasks,
    }
    parts = []  # one entry per line, so the file stays readable and diffable
    for key, value in record.items():
        if isinstance(value, list):
            rows = ",\n".join(json.dumps(v, ensure_ascii=False) for v in value)
            parts.append(f"{json.dumps(key)}: [\n{rows}\n]")
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{\n" + ",\n".join(parts) + "\n}\n", encoding="utf-8")
    return record


def read_task_file(path: str | Path) -> list[dict]:
    """The task records of a task file (a JSON object whose `tasks` list holds records with `id`, `db`,
    `question`, `gold`, optionally `hardness` and `origin`; `write_task_file` writes one), checked: ids unique,
    databases among the 20 of the dump."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"tasks_file {path} does not exist; build one with write_task_file")
    data = json.loads(path.read_text(encoding="utf-8"))
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, list) or not tasks:
        raise ValueError(f"tasks_file {path}: expected a JSON object with a non-empty 'tasks' list")
    known = set(spider_sqlite.expected_checksums()["databases"])
    seen: set[str] = set()
    out = []
    for i, t in enumerate(tasks):
        missing = {"id", "db", "question", "gold"} - set(t) if isinstance(t, dict) else {"a JSON object"}
        if missing:
            raise ValueError(f"tasks_file {path}: task {i} lacks {sorted(missing)}")
        if t["id"] in seen:
            raise ValueError(f"tasks_file {path}: task id {t['id']!r} appears twice")
        if t["db"] not in known:
            raise ValueError(
                f"tasks_file {path}: task {t['id']!r} names database {t['db']!r}, not in the dump"
            )
        seen.add(t["id"])
        out.append(dict(t, origin=t.get("origin", "task_file")))
    return out


# ------------------------------------------------------------------------------------------- the environment


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
        """`time_limit_s` bounds each query (fetching included); `row_cap` and `max_result_bytes` bound what a
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
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        if t_max < 1:
            raise ValueError(f"t_max={t_max} must be at least 1")
        if tasks_file is not None and source != "bundled":
            raise ValueError(f"tasks_file applies to source='bundled' (the dump's databases), not {source!r}")
        if source == "bundled":
            records = list(sample_tasks()) if tasks_file is None else read_task_file(tasks_file)
            unknown = set(test_dbs) - set(spider_sqlite.expected_checksums()["databases"])
            if unknown:
                raise ValueError(f"test_dbs names unknown databases {sorted(unknown)}")
            test = set(test_dbs)
            chosen = [r for r in records if (r["db"] in test) == (split == "test")]
            other = {r["db"] for r in records if (r["db"] in test) != (split == "test")}
            if not chosen:
                where = "the 23 samples" if tasks_file is None else f"tasks_file {tasks_file}"
                raise ValueError(
                    f"no {split} tasks in {where}: the test databases are {sorted(test)} and the tasks are on "
                    f"{sorted({r['db'] for r in records})}"
                )
        elif source == "hub":
            chosen = hub_tasks(split)
            other = {r["db"] for r in _hub_questions("test" if split == "train" else "train")}
        else:
            raise ValueError(f"source must be 'bundled' or 'hub', got {source!r}")
        overlap = {r["db"] for r in chosen} & other
        if overlap:
            raise ValueError(
                f"train and test share databases {sorted(overlap)}; the split must be by database"
            )
        idx = np.arange(len(chosen))
        if n is not None and n < len(chosen):
            idx = np.sort(np.random.default_rng(seed).choice(len(chosen), size=n, replace=False))
        db_source = "dump" if source == "bundled" else "hub"
        return [
            Task(
                task_id=chosen[i]["id"],
                env=cls.name,
                payload={
                    "db": chosen[i]["db"],
                    "db_source": db_source,
                    "question": chosen[i]["question"],
                    "gold": chosen[i]["gold"],
                    "hardness": chosen[i].get("hardness"),
                    "origin": chosen[i].get("origin", "spider"),
                },
                t_max=t_max,
            )
            for i in idx
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
            self.db = ReadOnlyDatabase(
                path, self.time_limit_s, self.row_cap, max_result_bytes=self.max_result_bytes
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
                rows=None if res.rows is None else len(res.rows),
                truncated=res.truncated,
                capped_by=res.capped_by,
                seconds=round(res.seconds, 4),
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


_GOLD_CACHE: dict[tuple[str, str], list[tuple]] = {}


def gold_result(db: ReadOnlyDatabase, gold: str) -> list[tuple]:
    """The gold query's rows (cached per database file and query); a failing gold query is an error in the task."""
    key = (str(db.path), gold)
    if key not in _GOLD_CACHE:
        res = db.run(gold, time_limit_s=max(10.0, db.time_limit_s))
        if res.error is not None or res.rows is None:
            raise RuntimeError(
                f"gold query fails on {db.path.name}: {res.error or 'no result set'}: {gold[:200]}"
            )
        if res.truncated:
            raise RuntimeError(f"gold query returns more than the row cap ({db.row_cap}) on {db.path.name}")
        _GOLD_CACHE[key] = res.rows
    return _GOLD_CACHE[key]


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
