"""Prefixed random ids (``trc_…``, ``stp_…``): a type prefix plus 16 base32 characters (80 bits).

Lowercase letters and digits only, so an id never starts with ``-`` on a command line and a
prefix is easy to type.

Step ids are the one kind written by the hundred thousand (``record``, ingest, the OTLP
writer): a process's step ids count up from a random 80-bit start instead of each being drawn
on its own. Unique all the same (two processes' runs of ids meet only if their random starts
fall within the few million ids they make of each other: about 2^-57), and an insert lands next
to the previous one in the primary-key index, instead of on a random page: a group commit
then writes a few index pages, not one page per row (``bench/record.py``). Trace ids stay
random throughout: they are the ids people type a unique prefix of.
"""

from __future__ import annotations

import base64
import itertools
import os
import re

TRACE = "trc"
STEP = "stp"
EVAL = "evl"
POLICY = "pol"
ANNOTATION = "ann"

ID_RE = re.compile(r"^[a-z]{3}_[A-Za-z0-9_-]{1,64}$")

_SPACE = 1 << 80
_SEQUENTIAL = frozenset({STEP})
_counters: dict[str, itertools.count[int]] = {}


def _counter(prefix: str) -> itertools.count[int]:
    counter = _counters.get(prefix)
    if counter is None:  # (``setdefault`` is atomic: racing threads get the same one)
        start = int.from_bytes(os.urandom(10), "big")
        counter = _counters.setdefault(prefix, itertools.count(start))
    return counter


def _forget_counters() -> None:
    """A forked child starts its own runs (it would repeat its parent's ids otherwise)."""
    _counters.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_counters)


def _raw(prefix: str, count: int) -> bytes:
    """``10 * count`` bytes: random, or the next values of the prefix's run (``next`` on a
    ``count`` is atomic, so threads never share a value)."""
    if prefix not in _SEQUENTIAL:
        return os.urandom(10 * count)
    counter = _counter(prefix)
    return b"".join((next(counter) % _SPACE).to_bytes(10, "big") for _ in range(count))


def new_id(prefix: str) -> str:
    """A fresh id with the given type prefix."""
    return f"{prefix}_{base64.b32encode(_raw(prefix, 1)).decode().lower()}"


def new_ids(prefix: str, count: int) -> list[str]:
    """``count`` fresh ids (one encoding for all; ingest and the recorder make many at once)."""
    raw = base64.b32encode(_raw(prefix, count)).decode().lower()
    return [f"{prefix}_{raw[i * 16 : i * 16 + 16]}" for i in range(count)]
