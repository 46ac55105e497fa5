"""What crosses a pipe between the kit and a process it does not trust: plain data, and framed messages.

- `wire_encode` / `wire_decode`: how values cross the boundary of the code sandbox's assert tests (arguments in,
  return values out): JSON with tags for the plain-data types JSON lacks, so `candidate(7) == (0, 1)` compares a
  real tuple. Exact types only; anything else (a class instance, a generator) cannot leave the child. The
  sandboxed child gets this very file (standard library only) and uses the same two functions. Decoding is
  bounded for hostile input: at most `MAX_DEPTH` levels of nesting, and a set, frozenset or dict in which more
  than `MAX_SAME_HASH` values share one hash is refused (such a set costs quadratic time to build: 60 000
  integers that all hash to 0 took 52 s).
- `json_items` / `check_items`: how many JSON values a message holds at most, counted on its bytes before it is
  parsed, so that a message of tiny containers (`[{},{},...]`: 9 MB became 239 MB of dicts) is refused before a
  single object is built (`MAX_ITEMS`).
- `FrameReader`: the parent side of a framed pipe, with a deadline and a size cap, so that a child that stalls,
  dies or writes junk costs at most its own message. Two framings: `LINE` (one message per line: the sandbox's
  JSON channel) and `LENGTH` (an 8-byte little-endian length, `<Q`, then the message: the BFCL call worker's
  pickles). `frame(data, framing)` writes one message in either.
- `start_worker` / `stop_worker` (the kit's side) and `read_job` / `send` (the worker's side): the pickle-over-pipe
  protocol of the kit's own worker processes (BFCL's call worker, InterCode-SQL's query worker), written once.
"""

from __future__ import annotations

import collections
import os
import pickle
import re
import selectors
import struct
import sys
import time

LINE, LENGTH = "line", "length"
FRAMINGS = (LINE, LENGTH)
_HEADER = struct.Struct("<Q")
MAX_DEPTH = 200  # levels of nesting a value may have to cross the channel
MAX_SAME_HASH = 64  # values of one set, frozenset or dict (keys) that may share a hash
MAX_ITEMS = 1 << 18  # JSON values (containers, elements, keys) one message of the sandbox's channel may hold
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


# ---------------------------------------------------------------------------------------------- plain data


def wire_encode(x, depth=0):
    """Plain data as JSON-ready data (tuples, sets, dicts with any keys, bytes, complex and non-finite floats
    tagged)."""
    if depth > MAX_DEPTH:
        raise ValueError("the value is nested too deeply to leave the sandbox")
    t = type(x)
    if x is None or t is bool or t is int or t is str:
        return x
    if t is float:
        return x if x - x == 0 else {"float": repr(x)}
    if t is list:
        return [wire_encode(v, depth + 1) for v in x]
    if t is tuple or t is set or t is frozenset:
        return {t.__name__: [wire_encode(v, depth + 1) for v in x]}
    if t is dict:
        return {"dict": [[wire_encode(k, depth + 1), wire_encode(v, depth + 1)] for k, v in x.items()]}
    if t is bytes:
        return {"bytes": x.hex()}
    if t is complex:
        return {"complex": [wire_encode(x.real, depth + 1), wire_encode(x.imag, depth + 1)]}
    raise TypeError(
        f"a {t.__name__} cannot leave the sandbox: return plain data (None, bool, int, float, str, "
        "bytes, complex, list, tuple, set, frozenset, dict)"
    )


def wire_decode(x, depth=0):
    """The inverse of wire_encode; ValueError for anything it would not produce."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    t = type(x)
    if x is None or t is bool or t is int or t is float or t is str:
        return x
    if t is list:
        return [wire_decode(v, depth + 1) for v in x]
    if t is dict and len(x) == 1:
        ((tag, v),) = x.items()
        try:
            if tag == "float" and v in ("nan", "inf", "-inf"):
                return float(v)
            if tag in ("tuple", "set", "frozenset") and type(v) is list:
                items = [wire_decode(e, depth + 1) for e in v]
                if tag == "tuple":
                    return tuple(items)
                _distinct_hashes(items)
                return set(items) if tag == "set" else frozenset(items)
            if tag == "dict" and type(v) is list:
                pairs = [(wire_decode(k, depth + 1), wire_decode(e, depth + 1)) for k, e in v]
                _distinct_hashes([k for k, _ in pairs])
                return dict(pairs)
            if tag == "bytes" and type(v) is str:
                return bytes.fromhex(v)
            if tag == "complex" and type(v) is list and len(v) == 2:
                return complex(wire_decode(v[0], depth + 1), wire_decode(v[1], depth + 1))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"unreadable {tag}: {exc}") from None
    raise ValueError(f"unreadable value of type {t.__name__}")


def _distinct_hashes(items: list) -> None:
    """Refuse set elements or dict keys of which more than MAX_SAME_HASH share a hash (building such a set is
    quadratic); TypeError for an unhashable one, as building the set would raise."""
    if len(items) > MAX_SAME_HASH:
        top = collections.Counter(hash(x) for x in items).most_common(1)[0][1]
        if top > MAX_SAME_HASH:
            raise ValueError(
                f"{top} values share one hash (more than {MAX_SAME_HASH}: a hash-collision attack)"
            )


def json_items(data: bytes | str) -> int:
    """An upper bound on the number of JSON values in `data` (containers, elements, keys), counted without
    parsing: the commas, brackets and braces outside strings, plus one. Linear in len(data)."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    n = data.count(",") + data.count("[") + data.count("{") + 1
    if n <= MAX_ITEMS:
        return n
    bare = _JSON_STRING.sub(
        '""', data
    )  # only where the quick count is over: strings may hold those characters
    return bare.count(",") + bare.count("[") + bare.count("{") + 1


def check_items(data: bytes | str, max_items: int = MAX_ITEMS) -> None:
    """ValueError if `data` may hold more than `max_items` JSON values (checked before it is parsed)."""
    n = json_items(data)
    if n > max_items:
        raise ValueError(f"a message of about {n} JSON values, over the limit of {max_items}")


# ------------------------------------------------------------------------------------------ framed messages


class FrameTooLong(ValueError):
    """A message longer than the reader's `max_bytes` (the writer is garbling the channel)."""


def frame(data: bytes, framing: str = LINE) -> bytes:
    """One message as it goes on the pipe: `data` + newline (`LINE`; `data` must hold none) or its length as
    `<Q` + `data` (`LENGTH`)."""
    if framing == LINE:
        return data + b"\n"
    if framing == LENGTH:
        return _HEADER.pack(len(data)) + data
    raise ValueError(f"framing must be one of {FRAMINGS}, got {framing!r}")


class FrameReader:
    """Reads framed messages from the pipe `fd` (not closed here). `read(deadline, max_bytes)` returns the next
    message's bytes (without its framing), or None at the `time.monotonic()` deadline or at end of file; after a
    None, `eof` says which. A message longer than `max_bytes` raises FrameTooLong (for `LENGTH` as soon as its
    header is read, before its bytes are)."""

    def __init__(self, fd: int, framing: str = LINE, chunk_bytes: int = 1 << 16) -> None:
        if framing not in FRAMINGS:
            raise ValueError(f"framing must be one of {FRAMINGS}, got {framing!r}")
        self.fd, self.framing, self.chunk_bytes = fd, framing, chunk_bytes
        self.buf = bytearray()
        self.eof = False
        self._sel = selectors.DefaultSelector()
        self._sel.register(fd, selectors.EVENT_READ)

    def _take(self, max_bytes: int | None) -> bytes | None:
        """A whole message from the buffer, if one is there."""
        if self.framing == LINE:
            cut = self.buf.find(b"\n")
            if cut < 0:
                if max_bytes is not None and len(self.buf) > max_bytes:
                    raise FrameTooLong(f"a message longer than {max_bytes} bytes")
                return None
            if max_bytes is not None and cut > max_bytes:
                raise FrameTooLong(f"a message longer than {max_bytes} bytes")
            data = bytes(self.buf[:cut])
            del self.buf[: cut + 1]
            return data
        if len(self.buf) < _HEADER.size:
            return None
        (n,) = _HEADER.unpack_from(self.buf)
        if max_bytes is not None and n > max_bytes:
            raise FrameTooLong(f"a message of {n} bytes, over the limit of {max_bytes}")
        if len(self.buf) < _HEADER.size + n:
            return None
        data = bytes(self.buf[_HEADER.size : _HEADER.size + n])
        del self.buf[: _HEADER.size + n]
        return data

    def read(self, deadline: float, max_bytes: int | None = None) -> bytes | None:
        """The next message, or None at `deadline` (eof False) or when the writer closed the pipe (eof True)."""
        while True:
            data = self._take(max_bytes)
            if data is not None:
                return data
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if not self._sel.select(max(left, 0)):
                if left <= 0:
                    return None
                continue
            chunk = os.read(self.fd, self.chunk_bytes)
            if not chunk:
                self.eof = True
                return None
            self.buf += chunk

    def close(self) -> None:
        """Release the selector (the descriptor belongs to the caller)."""
        self._sel.close()

    def __enter__(self) -> FrameReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------------------- the kit's worker processes


def start_worker(module: str, *args: str, what: str):
    """Start `python -s -P -m module args` with only the kit's root on PYTHONPATH and its stdout read as `LENGTH`
    frames; wait for its "ready" (a RuntimeError naming `what` where none comes within 120 s). Returns (the
    `subprocess.Popen`, its `FrameReader`). subprocess is imported here: the sandboxed child imports this file and
    must not pay for it."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # the kit's root
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"PYTHONPATH": root}
    proc = subprocess.Popen(
        [sys.executable, "-s", "-P", "-m", module, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    reader = FrameReader(proc.stdout.fileno(), LENGTH)
    ready = reader.read(time.monotonic() + 120)
    if ready is None or pickle.loads(ready) != "ready":
        stop_worker(proc, reader)
        raise RuntimeError(f"{what} did not start (python -m {module})")
    return proc, reader


def stop_worker(proc, reader: FrameReader) -> None:
    """Kill a worker and close its pipes."""
    proc.kill()
    proc.wait()
    reader.close()
    for stream in (proc.stdin, proc.stdout):
        stream.close()


def _read_exact(n: int) -> bytes:
    """`n` bytes from stdin; the end of stdin (the kit closed the pipe) ends the worker."""
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(0, n - len(buf))
        if not chunk:
            sys.exit(0)
        buf += chunk
    return bytes(buf)


def read_job() -> object:
    """In a worker: the next job, one `LENGTH` frame of a pickle on stdin."""
    (n,) = _HEADER.unpack(_read_exact(_HEADER.size))
    return pickle.loads(_read_exact(n))


def send(out: int, obj: object) -> None:
    """In a worker: one framed pickle on the descriptor `out`."""
    view = memoryview(frame(pickle.dumps(obj), LENGTH))
    while view:
        view = view[os.write(out, view) :]
