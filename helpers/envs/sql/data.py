"""The tasks of InterCode-SQL: the wheel's 23 samples on the 20 Spider dev databases converted from its dump
(`spider_sqlite`), task files built from Spider dev questions, Spider from the hub; the split by database."""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import helpers.envs.sql.spider_sqlite as spider_sqlite
from helpers.envs.sql.engine import ReadOnlyDatabase

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
    package = Path(__file__).resolve().parents[2]
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


def split_records(
    split: str,
    source: str,
    test_dbs: tuple[str, ...] | list[str] = TEST_DBS,
    tasks_file: str | Path | None = None,
) -> list[dict]:
    """The task records of one split in stored order, checked disjoint from the other split by database:
    `source="bundled"` the wheel's 23 samples (or the records of `tasks_file`) split by `test_dbs`, `source="hub"`
    Spider's train or dev questions."""
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
        raise ValueError(f"train and test share databases {sorted(overlap)}; the split must be by database")
    return chosen
