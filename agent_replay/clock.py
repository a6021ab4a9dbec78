"""Clocks. Services take one as an argument so tests can pin time."""

from __future__ import annotations

import datetime as dt
from typing import Protocol


class Clock(Protocol):
    """Anything that tells the current UTC time."""

    def now(self) -> dt.datetime: ...


class SystemClock:
    """The real clock, always timezone-aware UTC."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)


class FixedClock:
    """A clock that always says the same instant (tests, snapshots)."""

    def __init__(self, instant: dt.datetime) -> None:
        if instant.tzinfo is None:
            instant = instant.replace(tzinfo=dt.UTC)
        self.instant = instant

    def now(self) -> dt.datetime:
        return self.instant
