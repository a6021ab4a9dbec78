"""``KeyBar``: the footer line of every screen: its primary keys, then the app's, and a note on
the right (when the view last updated).

Textual's ``Footer`` cuts keys off mid-word at 80 columns ("D Dashb"). This bar fits the line
in steps instead: every key with its description; then the app's keys (D, T, W, ?, q) as bare
keys; then the screen's descriptions shortened to their first word; then whole keys dropped
from the end with "? more" (``?`` lists them all). Never a word cut in half.

A TUI module: imports Textual, never the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import monotonic

from rich.cells import cell_len
from textual.app import App
from textual.binding import Binding
from textual.content import Content
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget

_KEY = "bold $footer-key-foreground"
_DESCRIPTION = "$footer-description-foreground"
_MUTED = "$text-muted"
_NAV_PREFIXES = ("step-", "hop-", "cursor")
BUSY_AFTER = 0.2
"""Seconds a screen's worker may run before the footer says it is working."""
SPINNER = "⧗"


@dataclass(frozen=True)
class KeyItem:
    """One key of the bar."""

    key: str
    """As shown: ``esc``, ``^s``, ``/``."""
    description: str
    app_level: bool
    """One of the app's own keys (the same on every screen)."""

    @property
    def short(self) -> str:
        """The description cut to its first word (``Go to step`` → ``Go``)."""
        return self.description.split()[0] if " " in self.description else self.description


_Part = tuple[tuple[str, str], ...]
"""One key (or a run of bare keys) as ``Content.assemble`` pieces: (text, style)."""


def fit_keys(items: list[KeyItem], width: int) -> Content:
    """The bar's text for ``width`` cells, in the least shortened form that fits (measured
    before it is built: the bar is drawn again whenever the screen's bindings change)."""
    screen = [i for i in items if not i.app_level]
    app = [i for i in items if i.app_level]

    def full(item: KeyItem, short: bool = False) -> _Part:
        text = item.short if short else item.description
        return ((f" {item.key} ", _KEY), (text, _DESCRIPTION))

    def bare(group: list[KeyItem]) -> _Part:
        return tuple((f" {i.key}", _KEY) for i in group)

    def length(parts: list[_Part]) -> int:  # of the parts joined with single spaces
        return sum(cell_len(text) for part in parts for text, _ in part) + max(len(parts) - 1, 0)

    def build(parts: list[_Part]) -> Content:
        return Content(" ").join(Content.assemble(*part) for part in parts)

    # A short form only where it stays unambiguous ("Back a step" must not read "Back").
    firsts = [i.short for i in screen]
    unique = {i.key: firsts.count(i.short) == 1 for i in screen}
    forms = [
        [full(i) for i in screen] + [full(i) for i in app],
        [full(i) for i in screen] + ([bare(app)] if app else []),
        [full(i, short=unique[i.key]) for i in screen] + ([bare(app)] if app else []),
    ]
    for parts in forms:
        if length(parts) <= width:
            return build(parts)
    # Whole keys dropped from the end of the screen's list; ``?`` shows them all.
    more = Content.styled("  ? more", _MUTED)
    tail = [bare(app)] if app else []
    kept = [full(i, short=unique[i.key]) for i in screen]
    while kept:
        if length([*kept, *tail]) + more.cell_length <= width:
            return build([*kept, *tail]) + more
        kept.pop()
    return build(tail)[: max(width, 0)]


def own_escape(screen: Screen[object]) -> Binding | None:
    """The screen's own Esc binding (Back, Cancel…): the app takes Esc first only to close
    a notification or the key panel, so the footer shows what Esc does on the screen."""
    for binding in getattr(screen, "BINDINGS", []):
        if isinstance(binding, Binding) and "escape" in binding.key.split(","):
            return binding
    return None


def key_items(screen: Screen[object]) -> list[KeyItem]:
    """The keys a screen shows: its own active bindings with ``show`` set, then the focused
    widget's, then the app's."""
    from agent_replay.app import key_label

    groups: tuple[list[KeyItem], list[KeyItem], list[KeyItem]] = ([], [], [])
    seen: set[str] = set()
    for key, active in screen.active_bindings.items():
        binding, node = active.binding, active.node
        if isinstance(node, App) and binding.action == "dismiss_topmost":
            own = own_escape(screen)
            if own is None:
                continue
            binding, node = own, screen
        if not binding.show or not binding.description or not active.enabled:
            continue
        if binding.id and binding.id.startswith(_NAV_PREFIXES):
            continue
        if binding.description in seen:
            continue
        seen.add(binding.description)
        group = 2 if isinstance(node, App) else 0 if node is screen else 1
        groups[group].append(KeyItem(key_label(key), binding.description, group == 2))
    return [*groups[0], *groups[1], *groups[2]]


class KeyBar(Widget):
    """The footer: the screen's keys (fitted, never cut mid-word) and a note on the right."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-foreground;
    }
    """

    note: reactive[str] = reactive("")
    """Shown at the right end: when the view last updated ("updated 12:00:05")."""
    busy: reactive[bool] = reactive(False)
    """A worker of this screen has run for more than ``BUSY_AFTER`` seconds: say so."""

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.set_interval(BUSY_AFTER / 2, self._check_busy)

    def _check_busy(self) -> None:
        """Any of the screen's own workers (the store watcher aside) running for a while?"""
        now = monotonic()
        self.busy = any(
            w.node is self.screen and not w.is_finished and now - w._created_time > BUSY_AFTER
            for w in self.app.workers
        )

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            self.refresh()

    def render(self) -> Content:
        width = self.size.width
        items = key_items(self.screen)
        text = f"{SPINNER} working…" if self.busy else self.note
        notes = [text, text.split()[-1], ""] if text else [""]
        for shown in notes:  # "updated 12:00:05", then just "12:00:05" if keys would drop
            note = Content.styled(f"{shown} ", _MUTED) if shown else Content("")
            keys = fit_keys(items, max(width - note.cell_length - 1, 0))
            if not keys.plain.endswith("? more"):
                break
        gap = max(width - keys.cell_length - note.cell_length, 0)
        return Content.assemble(keys, " " * gap, note)
