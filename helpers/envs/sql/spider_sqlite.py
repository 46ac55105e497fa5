"""The 20 Spider dev databases as SQLite files, converted once from the MySQL dump that intercode-bench ships.

InterCode-SQL runs its tasks on MySQL in Docker; the kit runs them on SQLite instead. The intercode-bench wheel
ships the MySQL dump it loads into that container (`intercode/assets/datasets/spider_dev.sql`, the 20 Spider dev
databases; the same file as `data/sql/spider/ic_spider_dbs.sql` in InterCode's repository). This module turns it
into one SQLite file per database:

- each `CREATE TABLE` loses MySQL-only clauses (`COLLATE`, `AUTO_INCREMENT`, `ENGINE=...`), its secondary `KEY`
  lines (indexes MySQL adds for foreign keys; Spider's own SQLite files have none) and the names of its
  `UNIQUE KEY`s; a prefix length on a key column (`employee_hire_evaluation.evaluation` has
  ``PRIMARY KEY (`Employee_ID`,`Year_awarded`(255))``, which SQLite rejects) is dropped;
- each `INSERT ... VALUES (...),(...)` is tokenised (MySQL string escapes such as `\\'` and `\\n` decoded) and
  the rows are inserted with bound parameters, so no MySQL literal syntax reaches SQLite.

The files are written once into a cache folder: `$KIT_CACHE/spider_sqlite/`, by default `_cache/spider_sqlite/` in
the results root (`$KIT_RESULTS`, else `results/` in the repository; `helpers.store.results_root`). Two checksums
guard them: the SHA-256 of each database's *content* (schema text and every row in rowid order; independent of the
SQLite version that wrote the file) is bundled in `data/sql_spider_checksums.json` and checked when the files are
built; the SHA-256 of each *file* is written to the cache's manifest and checked whenever the cache is used, so a
changed file is rebuilt, never trusted.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import sqlite3
import tempfile
from pathlib import Path

DATA_DIR = Path(__file__).parents[1] / "data"  # helpers/envs/data
CHECKSUMS_FILE = DATA_DIR / "sql_spider_checksums.json"
INTERCODE_PIN = "intercode-bench==0.1.22"
DUMP_RELPATH = ("assets", "datasets", "spider_dev.sql")
SAMPLES_RELPATH = ("assets", "datasets", "sql_queries.csv")

_USE = re.compile(r"^USE `([^`]+)`;\s*$", re.MULTILINE)
_CREATE = re.compile(r"^CREATE TABLE `([^`]+)` \((.*?)\n\)[^;\n]*;", re.MULTILINE | re.DOTALL)
_INSERT = re.compile(r"^INSERT INTO `([^`]+)` VALUES (.*);\s*$", re.MULTILINE)
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_ESCAPES = {
    "0": "\0",
    "'": "'",
    '"': '"',
    "b": "\b",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "Z": "\x1a",
    "\\": "\\",
}


# ------------------------------------------------------------------------------------------ where things are


def intercode_file(*relpath: str) -> Path:
    """A file inside the installed intercode-bench package, found without importing it (its `__init__` pulls in
    Docker and scikit-learn)."""
    spec = importlib.util.find_spec("intercode")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"intercode-bench is not installed; the Spider dev databases come from its wheel: "
            f"pip install --no-deps {INTERCODE_PIN}"
        )
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*relpath)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing from the installed intercode-bench; reinstall {INTERCODE_PIN}"
        )
    return path


def cache_root() -> Path:
    """Where the kit caches derived data: $KIT_CACHE if set, else `_cache/` in the results root ($KIT_RESULTS or
    the repository's results/), so a run pointed elsewhere never writes into the checkout."""
    from helpers.store import results_root

    env = os.environ.get("KIT_CACHE")
    return Path(env).expanduser().resolve() if env else (results_root() / "_cache").resolve()


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------- MySQL -> SQLite parts


def split_databases(dump: str) -> dict[str, str]:
    """The dump cut into one text per database (at each `USE \\`name\\`;`), in dump order."""
    marks = list(_USE.finditer(dump))
    if not marks:
        raise ValueError("no `USE <database>;` statements found: not a mysqldump --all-databases file")
    ends = [m.start() for m in marks[1:]] + [len(dump)]
    return {m.group(1): dump[m.end() : end] for m, end in zip(marks, ends, strict=True)}


def convert_create(body: str) -> str:
    """The column and constraint lines of one MySQL `CREATE TABLE` as SQLite column definitions."""
    out = []
    for raw in body.strip().split("\n"):
        line = raw.strip().rstrip(",")
        if re.match(r"(FULLTEXT |SPATIAL )?KEY ", line):
            continue  # a secondary index: no effect on results
        line = re.sub(r"^UNIQUE KEY `[^`]*` ", "UNIQUE ", line)
        if re.match(r"(PRIMARY KEY|UNIQUE) \(", line):
            line = re.sub(r"(`[^`]+`)\(\d+\)", r"\1", line)  # prefix-length key column: `col`(255) -> `col`
        line = re.sub(r" (COLLATE|CHARACTER SET) \w+", "", line)
        line = re.sub(r" AUTO_INCREMENT\b", "", line)
        out.append("  " + line)
    return ",\n".join(out)


def parse_values(text: str) -> list[tuple]:
    """Rows of a MySQL `VALUES (...),(...)` list: strings (escapes decoded), ints, floats and NULL."""
    rows: list[tuple] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in " ,\n":
            i += 1
            continue
        if text[i] != "(":
            raise ValueError(f"expected '(' at offset {i} of a VALUES list, got {text[i : i + 20]!r}")
        i += 1
        row: list = []
        while True:
            while text[i] == " ":
                i += 1
            if text[i] == "'":
                chars = []
                i += 1
                while text[i] != "'" or text[i + 1 : i + 2] == "'":
                    if text[i] == "\\":
                        nxt = text[i + 1]
                        chars.append(_ESCAPES.get(nxt, "\\" + nxt))  # MySQL keeps the backslash in \% and \_
                        i += 2
                    elif text[i] == "'":  # a doubled quote inside the string
                        chars.append("'")
                        i += 2
                    else:
                        chars.append(text[i])
                        i += 1
                row.append("".join(chars))
                i += 1
            elif text.startswith("NULL", i):
                row.append(None)
                i += 4
            else:
                m = _NUMBER.match(text, i)
                if m is None:
                    raise ValueError(f"cannot parse a value at offset {i}: {text[i : i + 20]!r}")
                tok = m.group()
                row.append(float(tok) if any(c in tok for c in ".eE") else int(tok))
                i = m.end()
            while text[i] == " ":
                i += 1
            if text[i] == ",":
                i += 1
                continue
            if text[i] == ")":
                i += 1
                break
            raise ValueError(f"expected ',' or ')' at offset {i}, got {text[i : i + 20]!r}")
        rows.append(tuple(row))
    return rows


def build_database(section: str, path: Path) -> None:
    """Write one database's section of the dump as a fresh SQLite file at `path`."""
    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    try:
        for m in _CREATE.finditer(section):
            con.execute(f"CREATE TABLE `{m.group(1)}` (\n{convert_create(m.group(2))}\n)")
        for m in _INSERT.finditer(section):
            rows = parse_values(m.group(2))
            if rows:
                marks = ",".join("?" * len(rows[0]))
                con.executemany(f"INSERT INTO `{m.group(1)}` VALUES ({marks})", rows)
        con.commit()
    finally:
        con.close()


# ------------------------------------------------------------------------------------------------ checksums


def content_sha256(path: Path) -> tuple[str, dict[str, int]]:
    """SHA-256 of a database's content (each table's CREATE text, then its rows in rowid order with their
    SQLite types), and the row count per table. Independent of the SQLite version that wrote the file."""
    h = hashlib.sha256()
    counts: dict[str, int] = {}
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ).fetchall()
        for name, sql in tables:
            h.update(f"{name}\n{sql}\n".encode())
            n = 0
            for row in con.execute(f"SELECT * FROM `{name}` ORDER BY rowid"):
                h.update(repr(tuple((type(v).__name__, v) for v in row)).encode() + b"\n")
                n += 1
            counts[name] = n
    finally:
        con.close()
    return h.hexdigest(), counts


@functools.lru_cache(maxsize=1)
def expected_checksums() -> dict:
    """The bundled record: SHA-256 of the dump and, per database, its content SHA-256 and row counts."""
    return json.loads(CHECKSUMS_FILE.read_text())


def convert_dump(out_dir: Path, dump_path: Path | None = None) -> dict[str, dict]:
    """Convert every database of the dump into `out_dir/<db>.sqlite`; returns {db: {content_sha256, rows}}."""
    dump_path = dump_path or intercode_file(*DUMP_RELPATH)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {}
    for db, section in split_databases(dump_path.read_text(encoding="utf-8")).items():
        build_database(section, out_dir / f"{db}.sqlite")
        digest, counts = content_sha256(out_dir / f"{db}.sqlite")
        report[db] = {"content_sha256": digest, "rows": counts}
    return report


# ------------------------------------------------------------------------------------------------- the cache


def cache_dir() -> Path:
    """The folder of the converted databases."""
    return cache_root() / "spider_sqlite"


def _cache_is_valid(folder: Path, expected: dict) -> bool:
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        return False
    try:
        m = json.loads(manifest.read_text())
    except json.JSONDecodeError:
        return False
    if m.get("dump_sha256") != expected["dump_sha256"] or set(m.get("files", {})) != set(
        expected["databases"]
    ):
        return False
    return all(
        (folder / f"{db}.sqlite").is_file() and sha256_file(folder / f"{db}.sqlite") == digest
        for db, digest in m["files"].items()
    )


def ensure_databases(folder: Path | None = None) -> dict[str, Path]:
    """Paths of the 20 converted databases, building (or rebuilding) the cache if it is missing or any file
    differs from the manifest. The conversion is checked against the bundled content checksums."""
    folder = Path(folder) if folder is not None else cache_dir()
    expected = expected_checksums()
    if not _cache_is_valid(folder, expected):
        dump_path = intercode_file(*DUMP_RELPATH)
        got = sha256_file(dump_path)
        if got != expected["dump_sha256"]:
            raise ValueError(
                f"{dump_path} has SHA-256 {got}, expected {expected['dump_sha256']} ({INTERCODE_PIN}); "
                "the databases would not match the bundled checksums"
            )
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
            report = convert_dump(Path(tmp), dump_path)
            bad = [
                db
                for db, want in expected["databases"].items()
                if report.get(db, {}).get("content_sha256") != want["content_sha256"]
            ]
            if bad or set(report) != set(expected["databases"]):
                raise ValueError(
                    f"converted Spider databases differ from the bundled checksums: {bad or sorted(report)}; "
                    f"see {CHECKSUMS_FILE.name}"
                )
            files = {}
            for db in report:  # each file appears atomically, so a concurrent reader never sees half a file
                os.replace(Path(tmp) / f"{db}.sqlite", folder / f"{db}.sqlite")
                files[db] = sha256_file(folder / f"{db}.sqlite")
        manifest = {
            "dump_sha256": expected["dump_sha256"],
            "sqlite_version": sqlite3.sqlite_version,
            "files": files,
        }
        tmp_manifest = folder / f".manifest-{os.getpid()}.json"
        tmp_manifest.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        os.replace(tmp_manifest, folder / "manifest.json")
    return {db: folder / f"{db}.sqlite" for db in expected["databases"]}


def write_checksums(path: Path = CHECKSUMS_FILE) -> dict:
    """Maintainer tool: convert the dump and record its checksums in the bundled JSON (run once per dump)."""
    dump_path = intercode_file(*DUMP_RELPATH)
    with tempfile.TemporaryDirectory() as tmp:
        report = convert_dump(Path(tmp), dump_path)
    record = {
        "about": "SHA-256 of intercode-bench 0.1.22's spider_dev.sql and of each converted SQLite database's "
        "content (see helpers/envs/spider_sqlite.py). Spider: Yu et al. 2018, CC BY-SA 4.0.",
        "dump_sha256": sha256_file(dump_path),
        "databases": report,
    }
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    expected_checksums.cache_clear()
    return record
