"""The event stream a commtune worker writes (docs/events.md, version 1), written from Python.

A script trial's ranks write the same frames as commtune's C++ workers, to the file that
COMMTUNE_EVENT_FILE names ("{rank}" replaced by the rank), so that `commtune-cli import
--follow`, `summarize` and the launcher read them as they read a worker's.
"""
import json
import math
import os
import struct

MAGIC = 0x56455443  # "CTEV"
VERSION = 1
HELLO, STAT_NAME, STEP, MESSAGE = 1, 2, 3, 4
MAX_STAT_NAME = 128
MAX_MESSAGE = 4 << 20


def _frame(kind, body):
    return struct.pack("<IB", len(body), kind) + body


class EventFile:
    """One rank's event file. Every record is written whole and flushed, so a reader that follows
    the file while it grows sees whole frames (a frame cut by a crash is the file's end)."""

    def __init__(self, path, rank, world_size):
        # Never written through a symlink placed where the file goes, as the C++ workers do.
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        self._fd = os.open(path, flags, 0o644)
        self._ids = {}
        self._write(_frame(HELLO, struct.pack("<IHIII", MAGIC, VERSION, rank, world_size, os.getpid())))

    def _write(self, data):
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def _intern(self, out, name):
        found = self._ids.get(name)
        if found is not None:
            return found
        encoded = name.encode("ascii")
        if not 1 <= len(encoded) <= MAX_STAT_NAME or not all(0x20 <= c < 0x7F for c in encoded):
            raise ValueError(f"statistic name {name!r} is not 1 to {MAX_STAT_NAME} printable ASCII characters")
        if len(self._ids) >= 0xFFFF:
            raise ValueError("too many distinct statistic names in one event stream")
        ident = len(self._ids)
        self._ids[name] = ident
        out.append(_frame(STAT_NAME, struct.pack("<HH", ident, len(encoded)) + encoded))
        return ident

    def step(self, step, loss, lr, times, wire_bytes, uncompressed_bytes, stats=(), bucket_stats=()):
        """times: data, forward, backward, comm_wait, hook, optimizer, total (seconds);
        stats: (name, value); bucket_stats: (bucket, name, value)."""
        out = []
        ids = [(self._intern(out, name), float(value)) for name, value in stats]
        bucket_ids = [(int(bucket), self._intern(out, name), float(value)) for bucket, name, value in bucket_stats]
        body = [struct.pack("<qdd7dQQ", step, float(loss), float(lr), *[float(t) for t in times],
                            int(wire_bytes), int(uncompressed_bytes)),
                struct.pack("<H", len(ids)), b"".join(struct.pack("<Hd", i, v) for i, v in ids),
                struct.pack("<H", len(bucket_ids)), b"".join(struct.pack("<IHd", b, i, v) for b, i, v in bucket_ids)]
        out.append(_frame(STEP, b"".join(body)))
        self._write(b"".join(out))

    def message(self, kind, **fields):
        text = json.dumps({"kind": kind, **fields}, allow_nan=False, default=_plain).encode()
        if len(text) > MAX_MESSAGE:
            raise ValueError(f"a {kind} message of {len(text)} bytes is over the stream's {MAX_MESSAGE}")
        self._write(_frame(MESSAGE, text))

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _plain(value):
    """What a message may carry beyond JSON's types (a dtype, a device) is sent as its name."""
    return str(value)


def finite_or_none(value):
    """A loss for a message: JSON has no NaN, so a non-finite one is sent as null."""
    value = float(value)
    return value if math.isfinite(value) else None


def event_path(template, rank):
    return template.replace("{rank}", str(rank))
