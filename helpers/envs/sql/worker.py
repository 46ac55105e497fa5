"""The SQL query worker: a child process that runs the model's queries (`engine.QueryWorker`), so that a query
which the progress handler cannot stop is ended from outside.

SQLite checks its progress handler (and `interrupt()`) only between the virtual machine's jumps, so one row of
straight-line work (2400 `instr` calls on 64 KB values, from two MATERIALIZED CTEs) ran 46 s of CPU time against
a 2 s limit before the handler was reached. Here every query runs under a kernel CPU-time timer
(`setitimer(ITIMER_PROF)`, whose SIGPROF ends the process by its default action); the kit reads the signal in the
exit status, reports the query as stopped at its limit, and starts a fresh worker for the next query.

Started as `python -s -P -m helpers.envs.sql.worker` with only the kit's root on PYTHONPATH. Each job on stdin is a
frame (`helpers.sandbox.wire.LENGTH`) of a pickled (database path, its settings, SQL, time limit, hard CPU seconds);
the answer on stdout is one frame of the pickled `QueryResult`; "ready" is sent once at start. Connections are kept
per database and settings.
"""

from __future__ import annotations

import os
import signal

from helpers.envs.sql.engine import ReadOnlyDatabase
from helpers.sandbox.wire import read_job, send


def main() -> None:
    """Serve queries until stdin closes."""
    out = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing printed can garble the channel
    signal.signal(signal.SIGPROF, signal.SIG_DFL)  # the hard CPU-time limit ends the process
    databases: dict[tuple, ReadOnlyDatabase] = {}
    send(out, "ready")
    while True:
        path, settings, sql, limit, hard_s = read_job()
        key = (path, tuple(sorted(settings.items())))
        if key not in databases:
            databases[key] = ReadOnlyDatabase(path, **settings)
        signal.setitimer(signal.ITIMER_PROF, hard_s)
        try:
            result = databases[key].run(sql, limit)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        send(out, result)


if __name__ == "__main__":
    main()
