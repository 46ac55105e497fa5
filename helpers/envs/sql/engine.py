"""Read-only query running on one SQLite file: the guards (URI `mode=ro`, `PRAGMA query_only`, an authorizer that
allows only reading, no attached databases), the per-query time limit, the row and byte caps, and the observation
a result becomes. See the package doc (`helpers.envs.sql`) for why each guard is there."""

from __future__ import annotations

import math
import pickle
import signal
import sqlite3
import subprocess
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from helpers.envs.base import stall_guard_s
from helpers.sandbox.wire import LENGTH, FrameReader, frame, start_worker, stop_worker

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
# SQL functions refused: loading code, and fts3_tokenizer (its one-argument form returns a pointer, its two-argument
# form overwrites one, and the change outlives the query)
REFUSED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer"})
MAX_VALUE_BYTES = (
    65_536  # SQLITE_LIMIT_LENGTH: the longest string or blob a query may make (the databases: 60)
)
MAX_COLUMNS = 200  # SQLITE_LIMIT_COLUMN: the most columns a result may have (the databases' widest table: 50)
WORKER_MODULE = "helpers.envs.sql.worker"
# An isolated query (`ReadOnlyDatabase(isolated=True)`) runs in the worker under a kernel CPU-time limit of
# HARD_FACTOR x its time limit + HARD_EXTRA_S: the progress handler stops it at its limit wherever SQLite reaches the
# handler; the kernel's limit ends what the handler cannot reach (one row of straight-line work).
HARD_FACTOR, HARD_EXTRA_S = 2.0, 0.5


@dataclass
class QueryResult:
    """What one query produced: rows (None where the statement returns no result set) or an error."""

    rows: list[tuple] | None
    columns: list[str]
    error: str | None = None
    truncated: bool = False  # more rows than the row cap, or more bytes than the byte cap: only a prefix kept
    capped_by: str | None = None  # "rows" or "bytes": which cap cut the result
    refused: bool = False  # the guard refused the statement (a write, ATTACH, a PRAGMA write, ...)
    timed_out: bool = False  # stopped at the time limit (CPU time of the thread running the query)
    stalled: bool = False  # stopped by the wall-clock stall guard (the machine, not the query)
    seconds: float = 0.0  # wall-clock time
    cpu_seconds: float = 0.0  # CPU time of the thread that ran the query (what the time limit counts)
    tables_read: frozenset[str] = frozenset()

    @property
    def value(self) -> list[tuple] | str | None:
        """What InterCode's reward sees: the rows, the error message, or None."""
        return self.error if self.error is not None else self.rows


class ReadOnlyDatabase:
    """A read-only connection to one SQLite file with a per-query time limit, a row cap and a byte cap (the sum
    of the sizes of the values kept; what reaches the observation and the reward is bounded by both). The time limit
    counts CPU time of the thread running the query (`time.thread_time()`), so a busy machine changes no outcome; a
    wall-clock stall guard (`helpers.envs.base.stall_guard_s`) stops a query only on a starved machine, says so in
    the error and warns."""

    def __init__(
        self,
        path: Path,
        time_limit_s: float = 2.0,
        row_cap: int = 10_000,
        max_value_bytes: int = MAX_VALUE_BYTES,
        max_result_bytes: int = 4 << 20,
        max_columns: int = MAX_COLUMNS,
        isolated: bool = False,
    ):
        """`isolated`: run each query `run` is given (not the kit's own: `trusted=True`) in the query worker, ended
        from outside at `HARD_FACTOR` x its limit of CPU time whatever it does (see `QueryWorker`)."""
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
        self.isolated = bool(isolated)
        self.settings = {
            "time_limit_s": self.time_limit_s,
            "row_cap": self.row_cap,
            "max_value_bytes": int(max_value_bytes),
            "max_result_bytes": self.max_result_bytes,
            "max_columns": int(max_columns),
        }
        self.con = sqlite3.connect(
            f"file:{quote(str(self.path.resolve()))}?mode=ro",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=0,  # re-prepare every query, so the authorizer sees (and records) each one
        )
        self.con.execute("PRAGMA query_only = 1")
        self.con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        # Every value a query makes is at most `max_value_bytes` (so one function call, which the progress handler
        # cannot interrupt, works on small strings: instr() on 1 MB strings took 9 s), and a row has at most
        # `max_columns` values (so one row, which is fetched whole before the byte cap can see it, is at most
        # max_columns x max_value_bytes: 2000 columns of zeroblob(1000000) were 2 GB).
        self.con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, int(max_value_bytes))
        self.con.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, int(max_columns))
        self.con.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 100_000)
        self._refusal: str | None = None
        self._reads: set[str] = set()
        self._cpu_deadline = self._wall_deadline = math.inf
        self._stopped_by: str | None = None
        self.con.set_authorizer(self._authorize)
        self.con.set_progress_handler(self._over_time, 1000)

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
    ) -> int:
        if action == sqlite3.SQLITE_READ and arg1:
            self._reads.add(arg1.lower())
        if action in _ALLOWED_ACTIONS and not (
            action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in REFUSED_FUNCTIONS
        ):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in SAFE_PRAGMAS:
            return sqlite3.SQLITE_OK
        name = _ACTION_NAMES.get(action, f"action {action}")
        what = f"PRAGMA {arg1}" if action == sqlite3.SQLITE_PRAGMA else name
        if action == sqlite3.SQLITE_FUNCTION:
            what = f"function {arg2}"
        elif action == sqlite3.SQLITE_UPDATE and (arg1 or "").lower() in ("sqlite_master", "sqlite_schema"):
            # SQLite asks this when a table-valued function (json_each, json_tree, pragma_...) is first used
            what = "a table-valued function (json_each, json_tree, pragma_table_info, ...)"
        self._refusal = self._refusal or f"{what} is not allowed: the database is read-only"
        return sqlite3.SQLITE_DENY

    def _over_time(self) -> int:
        """The progress handler: stop at the CPU-time limit of the query's thread, or at the stall guard."""
        if time.thread_time() > self._cpu_deadline:
            self._stopped_by = "cpu"
        elif time.monotonic() > self._wall_deadline:
            self._stopped_by = "stall"
        return int(self._stopped_by is not None)

    def run(self, sql: str, time_limit_s: float | None = None, trusted: bool = False) -> QueryResult:
        """Run one statement; never raises for a bad query (the error is in the result). With `isolated`, a query
        not `trusted` (the model's) runs in the query worker."""
        limit = self.time_limit_s if time_limit_s is None else float(time_limit_s)
        if self.isolated and not trusted:
            return QUERY_WORKER.run(str(self.path.resolve()), self.settings, sql, limit)
        self._refusal, self._reads = None, set()
        start, cpu_start = time.monotonic(), time.thread_time()
        self._cpu_deadline, self._wall_deadline = cpu_start + limit, start + stall_guard_s(limit)
        self._stopped_by = None
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
                cpu_seconds=time.thread_time() - cpu_start,
                tables_read=frozenset(self._reads),
            )
        except (sqlite3.Error, ValueError, OverflowError) as err:  # ValueError: a NUL character in the SQL
            msg, refused = str(err), False
            interrupted = isinstance(err, sqlite3.OperationalError) and msg == "interrupted"
            if self._refusal is not None:
                msg, refused = f"not authorized: {self._refusal}", True
            elif interrupted and self._stopped_by == "cpu":
                msg = f"query stopped: it ran past the {limit:g} s time limit (CPU time)"
            elif interrupted and self._stopped_by == "stall":
                msg = (
                    f"query stopped by the stall guard: no result within {stall_guard_s(limit):g} s of wall-clock "
                    f"time (the machine is too busy; the query's own limit is {limit:g} s of CPU time)"
                )
                warnings.warn(f"{self.path.name}: {msg}", RuntimeWarning, stacklevel=2)
            return QueryResult(
                None,
                [],
                error=msg,
                refused=refused,
                timed_out=interrupted and self._stopped_by == "cpu",
                stalled=interrupted and self._stopped_by == "stall",
                seconds=time.monotonic() - start,
                cpu_seconds=time.thread_time() - cpu_start,
                tables_read=frozenset(self._reads),
            )
        finally:
            cur.close()
            self._cpu_deadline = self._wall_deadline = math.inf

    def schema(self) -> dict[str, list[str]]:
        """Table -> column names, in the database's order (sqlite_* internal tables left out)."""
        names = self.run(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid",
            trusted=True,
        )
        out = {}
        for (name,) in names.rows or []:
            info = self.run(f"PRAGMA table_info(`{name}`)", trusted=True)
            out[name] = [row[1] for row in info.rows or []]
        return out

    def close(self) -> None:
        self.con.close()


class QueryWorker:
    """One process per kit process (`worker.py`) that runs the model's queries, each under a kernel CPU-time limit
    (`HARD_FACTOR` x the query's limit + `HARD_EXTRA_S`); killed and restarted when a query overruns it or the
    wall-clock stall guard. Queries from several threads take turns."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.reader: FrameReader | None = None
        self.lock = threading.Lock()

    def _start(self) -> None:
        self.proc, self.reader = start_worker(WORKER_MODULE, what="intercode_sql: the query worker")

    def stop(self) -> None:
        """End the worker (a later query starts a fresh one)."""
        if self.proc is not None:
            stop_worker(self.proc, self.reader)
            self.proc = self.reader = None

    def run(self, path: str, settings: dict, sql: str, limit: float) -> QueryResult:
        """`sql` on the database at `path` (opened with `settings`) in the worker; a QueryResult whatever happens."""
        hard = HARD_FACTOR * limit + HARD_EXTRA_S
        guard = stall_guard_s(limit) + 10.0  # beyond the worker's own stall guard, which answers first
        with self.lock:
            if self.proc is None:
                self._start()
            start = time.monotonic()
            data = None
            try:
                self.proc.stdin.write(frame(pickle.dumps((path, settings, sql, limit, hard)), LENGTH))
                self.proc.stdin.flush()
            except OSError:
                pass  # the worker is gone; its exit status says why
            else:
                data = self.reader.read(time.monotonic() + guard)
            if data is not None:
                return pickle.loads(data)
            stalled = not self.reader.eof
            if stalled:
                self.stop()
                code = None
            else:
                code = self.proc.wait()
                self.stop()
        seconds = time.monotonic() - start
        if stalled:
            msg = (
                f"query stopped by the stall guard: no result within {guard:g} s of wall-clock time (the machine "
                f"is too busy; the query's own limit is {limit:g} s of CPU time)"
            )
            warnings.warn(f"{Path(path).name}: {msg}", RuntimeWarning, stacklevel=3)
            return QueryResult(None, [], error=msg, stalled=True, seconds=seconds)
        if code == -signal.SIGPROF:
            msg = (
                f"query stopped: it ran past the {limit:g} s time limit (CPU time; one step of it could not be "
                f"interrupted, so it was ended at {hard:g} s)"
            )
            return QueryResult(None, [], error=msg, timed_out=True, seconds=seconds, cpu_seconds=hard)
        return QueryResult(None, [], error=f"the query worker ended during the query (exit status {code})")


QUERY_WORKER = QueryWorker()


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


_GOLD_CACHE: dict[tuple[str, str], list[tuple]] = {}


def gold_result(db: ReadOnlyDatabase, gold: str) -> list[tuple]:
    """The gold query's rows (cached per database file and query); a failing gold query is an error in the task."""
    key = (str(db.path), gold)
    if key not in _GOLD_CACHE:
        res = db.run(gold, time_limit_s=max(10.0, db.time_limit_s), trusted=True)
        if res.error is not None or res.rows is None:
            raise RuntimeError(
                f"gold query fails on {db.path.name}: {res.error or 'no result set'}: {gold[:200]}"
            )
        if res.truncated:
            raise RuntimeError(f"gold query returns more than the row cap ({db.row_cap}) on {db.path.name}")
        _GOLD_CACHE[key] = res.rows
    return _GOLD_CACHE[key]
