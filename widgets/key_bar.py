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

from textual.app import App
from textual.content import Content
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget

_KEY = "bold $footer-key-foreground"
_DESCRIPTION = "$footer-description-foreground"
_MUTED = "$text-muted"
_NAV_PREFIXES = ("step-", "hop-", "cursor")


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


def fit_keys(items: list[KeyItem], width: int) -> Content:
    """The bar's text for ``width`` cells, in the least shortened form that fits."""
    screen = [i for i in items if not i.app_level]
    app = [i for i in items if i.app_level]

    def full(item: KeyItem, short: bool = False) -> Content:
        text = item.short if short else item.description
        return Content.assemble((f" {item.key} ", _KEY), (text, _DESCRIPTION))

    def bare(group: list[KeyItem]) -> Content:
        return Content.assemble(*((f" {i.key}", _KEY) for i in group))

    forms = [
        [full(i) for i in screen] + [full(i) for i in app],
        [full(i) for i in screen] + ([bare(app)] if app else []),
        [full(i, short=True) for i in screen] + ([bare(app)] if app else []),
    ]
    for parts in forms:
        line = Content(" ").join(parts)
        if line.cell_length <= width:
            return line
    # Whole keys dropped from the end of the screen's list; ``?`` shows them all.
    more = Content.styled("  ? more", _MUTED)
    tail = [bare(app)] if app else []
    kept = [full(i, short=True) for i in screen]
    while kept:
        line = Content(" ").join([*kept, *tail])
        if line.cell_length + more.cell_length <= width:
            return line + more
        kept.pop()
    return Content(" ").join(tail)[: max(width, 0)]


def key_items(screen: Screen[object]) -> list[KeyItem]:
    """The keys a screen shows: its active bindings with ``show`` set, app keys last."""
    from agent_replay.app import key_label

    items: list[KeyItem] = []
    seen: set[str] = set()
    for key, active in screen.active_bindings.items():
        binding = active.binding
        if not binding.show or not binding.description or not active.enabled:
            continue
        if binding.id and binding.id.startswith(_NAV_PREFIXES):
            continue
        if binding.description in seen:
            continue
        seen.add(binding.description)
        items.append(KeyItem(key_label(key), binding.description, isinstance(active.node, App)))
    return [i for i in items if not i.app_level] + [i for i in items if i.app_level]


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

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            self.refresh()

    def render(self) -> Content:
        width = self.size.width
        items = key_items(self.screen)
        notes = [self.note, self.note.split()[-1]] if self.note else [""]
        for text in notes:  # "updated 12:00:05", then just "12:00:05" if keys would drop
            note = Content.styled(f"{text} ", _MUTED) if text else Content("")
            keys = fit_keys(items, max(width - note.cell_length - 1, 0))
            if not keys.plain.endswith("? more"):
                break
        gap = max(width - keys.cell_length - note.cell_length, 0)
        return Content.assemble(keys, " " * gap, note)
