"""Prefixed random ids (``trc_…``, ``stp_…``): a type prefix plus 16 base32 characters (80 bits).

Lowercase letters and digits only, so an id never starts with ``-`` on a command line and a
prefix is easy to type.
"""

from __future__ import annotations

import base64
import os
import re

TRACE = "trc"
STEP = "stp"
EVAL = "evl"
POLICY = "pol"
ANNOTATION = "ann"

ID_RE = re.compile(r"^[a-z]{3}_[A-Za-z0-9_-]{1,64}$")


def new_id(prefix: str) -> str:
    """A fresh id with the given type prefix."""
    return f"{prefix}_{base64.b32encode(os.urandom(10)).decode().lower()}"


def new_ids(prefix: str, count: int) -> list[str]:
    """``count`` fresh ids (one urandom call; ingest makes many at once)."""
    raw = base64.b32encode(os.urandom(10 * count)).decode().lower()
    return [f"{prefix}_{raw[i * 16 : i * 16 + 16]}" for i in range(count)]
