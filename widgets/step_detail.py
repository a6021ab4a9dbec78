"""``StepDetail``: everything recorded about one step, in a scrollable pane.

Shows the step's facts, its error, input and output (JSON pretty-printed and highlighted by
Textual's lexer-based ``highlight``, strings as plain text), its decision (options with score and
rationale, the chosen one marked, confidence, who decided) and its snapshot (context window,
environment, tool state), then its metadata. Every piece of producer text is escaped with
``display.safe`` first and shown as plain ``Content``, never parsed as markup. Long payloads are
folded to their first ``FOLD_LINES`` lines until the owner sets ``folded = False``.

A TUI module: imports Textual, never the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.reactive import var
from textual.widgets import Static

from agent_replay.display import fmt_int, fmt_ms, fmt_time, safe
from agent_replay.services.outcome import outcome_note
from agent_replay.trace.io import dumps_bytes, loads
from agent_replay.widgets.step_timeline import STEP_COLORS, STEP_ICONS

FOLD_LINES = 40
"""Lines of a payload shown while folded."""
FOLD_CHARS = 8_000
"""Characters of a payload shown while folded (a single huge line folds too)."""

SECTIONS: tuple[tuple[str, str], ...] = (
    ("error", "Error"),
    ("input", "Input"),
    ("output", "Output"),
    ("decision", "Decision"),
    ("context", "Snapshot · context window"),
    ("environment", "Snapshot · environment"),
    ("tool-state", "Snapshot · tool state"),
    ("metadata", "Metadata"),
)
"""The detail's sections in order: (id suffix, border title). Empty ones are hidden."""

_MUTED = "$text-muted"
_ROLE_STYLES = {
    "system": "bold $text-warning",
    "user": "bold $text-primary",
    "assistant": "bold $text-success",
    "tool": "bold $text-accent",
}


def fold(text: str, folded: bool) -> tuple[str, str | None]:
    """Cut ``text`` to its first ``FOLD_LINES`` lines (and ``FOLD_CHARS`` characters).

    Returns:
        The visible text and, if anything was cut, what the fold hides ("12 more lines").
    """
    if not folded:
        return text, None
    lines = text.split("\n")
    if len(lines) > FOLD_LINES:
        hidden = len(lines) - FOLD_LINES
        return "\n".join(lines[:FOLD_LINES]), f"{hidden:,} more line{'s' * (hidden != 1)}"
    if len(text) > FOLD_CHARS:
        return text[:FOLD_CHARS], f"{len(text) - FOLD_CHARS:,} more characters"
    return text, None


def json_text(value: Any) -> str:
    """A JSON value pretty-printed two spaces deep, escaped for the terminal."""
    return safe(dumps_bytes(value, indent=True).decode(), multiline=True)


def _fold_note(hidden: str) -> Content:
    return Content.styled(f"… {hidden} (press f to expand)", f"italic {_MUTED}")


_LANGUAGE_KEYS = {
    "sql": "sql",
    "query": "sql",
    "command": "bash",
    "cmd": "bash",
    "script": "bash",
    "code": "python",
    "source": "python",
    "patch": "diff",
    "diff": "diff",
}
_SQL_START = ("select ", "with ", "insert ", "update ", "delete ", "create ", "alter ", "drop ")


def guess_language(text: str, key: str | None = None) -> str | None:
    """The language to highlight a string in: from its key (``sql``, ``command``, ``patch``…),
    else from how it starts (a diff, SQL, Python, JSON, a shell script); ``None``: plain."""
    if key is not None and key.lower() in _LANGUAGE_KEYS:
        return _LANGUAGE_KEYS[key.lower()]
    head = text.lstrip()[:200]
    lowered = head.lower()
    if head.startswith(("diff --git", "--- ", "@@ ")) or "\n@@ " in text[:2000]:
        return "diff"
    if lowered.startswith(_SQL_START):
        return "sql"
    if head.startswith(("def ", "import ", "from ", "class ", "async def ")):
        return "python"
    if head.startswith(("#!/bin/", "#!/usr/bin/env bash", "#!/usr/bin/env sh", "$ ")):
        return "bash"
    if head.startswith(("{", "[")):
        try:
            loads(text)
        except ValueError:
            return None
        return "json"
    return None


def text_content(text: str, folded: bool, key: str | None = None) -> tuple[Content, str | None]:
    """A string as text (its newlines as lines, never ``\\n``), highlighted when its language
    can be told; and what the fold hides."""
    visible, hidden = fold(safe(text, multiline=True), folded)
    language = guess_language(text, key)
    body = highlight(visible, language=language) if language else Content(visible)
    return body, hidden


def _block_strings(value: Any) -> dict[str, str]:
    """The top-level string members of an object that span lines (shown as text blocks)."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(v, str) and "\n" in v.strip()}


def payload_content(value: Any, folded: bool) -> tuple[Content, bool]:
    """A payload for display: strings as text (highlighted when their language is clear),
    anything else as highlighted JSON, with an object's multi-line string members taken out
    and shown as text blocks under their key (the demo's SQL reads as SQL, not ``\\n``).

    Returns:
        The content and whether part of it was folded away.
    """
    if isinstance(value, str):
        body, hidden = text_content(value, folded)
    else:
        blocks = _block_strings(value)
        rest = {k: v for k, v in value.items() if k not in blocks} if blocks else value
        parts: list[Content] = []
        hidden = None
        if not blocks or rest:
            visible, hidden = fold(json_text(rest), folded)
            parts.append(highlight(visible, language="json"))
        for key, text in blocks.items():
            block, block_hidden = text_content(text, folded, key)
            hidden = hidden or block_hidden
            parts.append(Content.styled(f"{safe(key)} ─", f"bold {_MUTED}"))
            parts.append(block)
        body = Content("\n").join(parts)
    if hidden is None:
        return body, False
    return Content("\n").join([body, _fold_note(hidden)]), True


def context_content(value: Any, folded: bool) -> tuple[Content, bool]:
    """A context window: a list of ``{role, content}`` messages as a transcript, else JSON."""
    messages = value if isinstance(value, list) else None
    if not messages or not all(isinstance(m, Mapping) and "role" in m for m in messages):
        return payload_content(value, folded)
    parts: list[Content] = []
    any_folded = False
    for message in messages:
        role = safe(message.get("role"))
        text = message.get("content")
        body, was_folded = payload_content(text if text is not None else "", folded)
        any_folded |= was_folded
        parts.append(Content.styled(role, _ROLE_STYLES.get(role, "bold")))
        parts.append(body)
    return Content("\n").join(parts), any_folded


def decision_content(decision: Mapping[str, Any]) -> Content:
    """The options (chosen one marked, with score and rationale), rationale, confidence, who."""
    chosen = decision.get("chosen")
    lines: list[Content] = []
    options = decision.get("options") or []
    for option in options:
        name = option.get("option")
        is_chosen = name == chosen
        score = option.get("score")
        lines.append(
            Content.assemble(
                ("✔ " if is_chosen else "  ", "bold $text-success"),
                (safe(name), "bold $text-success" if is_chosen else "bold"),
                (f"  {score:.2f}" if isinstance(score, int | float) else "", "$text-warning"),
                (" chosen" if is_chosen else "", f"italic {_MUTED}"),
            )
        )
        if option.get("rationale"):
            lines.append(Content.assemble("    ", (safe(option["rationale"]), _MUTED)))
    if chosen is not None and all(o.get("option") != chosen for o in options):
        lines.append(Content.assemble(("chosen ", _MUTED), (safe(chosen), "bold $text-success")))
    if decision.get("rationale"):
        lines.append(Content(""))
        lines.append(
            Content.assemble(("rationale ", _MUTED), safe(decision["rationale"], multiline=True))
        )
    facts: list[tuple[str, str]] = []
    confidence = decision.get("confidence")
    if isinstance(confidence, int | float):
        facts.append(("confidence ", f"{confidence:.2f}"))
    if decision.get("decided_by"):
        facts.append(("decided by ", safe(decision["decided_by"])))
    if facts:
        lines.append(
            Content(" · ").join(Content.assemble((label, _MUTED), value) for label, value in facts)
        )
    return Content("\n").join(lines)


def title_content(step: Mapping[str, Any]) -> Content:
    """The step's number, type and name, then its facts (duration, tokens, model, links)."""
    step_type = str(step.get("step_type"))
    first = Content.assemble(
        (f"Step {step['step_number']}  ", "bold"),
        (
            f"{STEP_ICONS.get(step_type, '·')} {step_type}  ",
            f"bold {STEP_COLORS.get(step_type, '')}",
        ),
        (safe(step.get("name") or "—"), "bold"),
    )
    facts: list[Content] = []

    def fact(label: str, value: str) -> None:
        # no-break spaces inside a fact: the line wraps between facts, not within one
        label, value = label.replace(" ", "\u00a0"), value.replace(" ", "\u00a0")
        facts.append(Content.assemble((label, _MUTED), value))

    if step.get("duration_ms") is not None:
        fact("duration ", fmt_ms(step["duration_ms"]))
    if step.get("tokens_used") is not None:
        fact("tokens ", fmt_int(step["tokens_used"]))
    if step.get("model"):
        fact("model ", safe(step["model"]))
    if step.get("started_at"):
        fact("started ", fmt_time(step["started_at"]))
    if step.get("parent_step") is not None:
        fact("parent ", f"#{step['parent_step']}")
    if step.get("caused_by_step") is not None:
        fact("caused by ", f"#{step['caused_by_step']}")
    lines = [first]
    if facts:
        lines.append(Content(" · ").join(facts))
    note = outcome_note(dict(step))
    if note:
        lines.append(
            Content.styled(
                f"○ {note}: the fork has not run this step (fork --rerun re-sends an llm_call)",
                "italic $text-warning",
            )
        )
    return Content("\n").join(lines)


class StepDetail(VerticalScroll):
    """The selected step in full. The owner sets ``step`` and ``folded``."""

    DEFAULT_CSS = """
    StepDetail {
        background: $surface;
        padding: 0 1;
        /* The scrollbar's room is kept: a step taller than the pane after a shorter one
           would otherwise narrow every section, re-wrap it and lay the screen out again. */
        scrollbar-gutter: stable;
        &:focus { background-tint: $foreground 5%; }
        & > #detail-title { padding: 0 1; margin-bottom: 1; }
        & > .step-detail--section {
            border: round $foreground 20%;
            border-title-color: $text-muted;
            border-title-style: bold;
            padding: 0 1;
            height: auto;
        }
        & > #detail-error { border: round $error 60%; border-title-color: $text-error; }
        & > #detail-empty { color: $text-muted; padding: 1 1; }
    }
    """

    step: var[Mapping[str, Any] | None] = var(None)
    """The step object shown (the trace format's JSON, as the store returns it)."""
    folded: var[bool] = var(True)
    """Whether long payloads are cut to their first ``FOLD_LINES`` lines."""
    has_folded: var[bool] = var(False)
    """Whether the current view hides part of a payload (set by the widget)."""
    empty_message: var[str] = var("No step selected.")
    """What the pane says when there is no step to show."""

    _sections_later = False

    def compose(self) -> ComposeResult:
        # The sections are mounted when a step first has something to show in them
        # (``_section``), and the empty-state line when there is no step to show
        # (``_show_empty``): most steps fill two or three of the eight sections, a timeline
        # opens on a step, and every widget mounted is styled and laid out again each time
        # the screen is shown.
        yield Static(id="detail-title")

    def on_mount(self) -> None:
        # No step yet: say so, unless one arrives before the first frame (a timeline's
        # first step usually does).
        self.call_after_refresh(self._show_empty)

    def _show_empty(self) -> None:
        """The empty-state line, mounted the first time there is no step to show."""
        if self.step is not None:
            return
        found = self.query_children("#detail-empty")
        if found:
            found.first().display = True
        else:
            self.mount(Static(Content(self.empty_message), id="detail-empty"))

    def _section(self, key: str) -> Static:
        """The section ``key``, mounted (in ``SECTIONS`` order) the first time it is used."""
        found = self.query_children(f"#detail-{key}")
        if found:
            return found.first(Static)
        section = Static(id=f"detail-{key}", classes="step-detail--section")
        section.border_title = dict(SECTIONS)[key]
        keys = [name for name, _ in SECTIONS]
        later = keys[keys.index(key) + 1 :]
        before = next(
            (
                child
                for child in self.children
                if child.id in {f"detail-{k}" for k in later} or child.id == "detail-empty"
            ),
            None,
        )
        self.mount(section, before=before)
        return section

    def watch_step(self) -> None:
        self._show()
        self.scroll_home(animate=False)

    def watch_folded(self) -> None:
        self._show()

    def watch_empty_message(self, message: str) -> None:
        for empty in self.query_children("#detail-empty"):
            cast(Static, empty).update(Content(message))

    def section_text(self, key: str) -> str | None:
        """The plain text of a section (``None`` when hidden): what a test or a copy reads."""
        found = self.query_children(f"#detail-{key}")
        if not found or not found.first().display:
            return None
        content = found.first(Static).content
        return content.plain if isinstance(content, Content) else str(content)

    def show_title_first(self, step: Mapping[str, Any] | None) -> None:
        """Show ``step``: its title now, its sections once the screen has refreshed.

        For a screen's first frame: a section mounted now is not laid out in time for that
        frame anyway (the title paints with it, the sections on the next one), and building
        them (highlighting the payloads, mounting) came before it, ~3 ms (issue 17).
        """
        self._sections_later = True
        self.step = step

    def _show(self) -> None:
        if not self.is_mounted:
            return
        step = self.step
        if step is None:
            self._show_empty()
        else:
            for empty in self.query_children("#detail-empty"):
                empty.display = False
        title = self.query_one("#detail-title", Static)
        title.display = step is not None
        if step is not None:
            title.update(title_content(step))
        if self._sections_later:
            self._sections_later = False
            self.call_after_refresh(self._show_sections)
        else:
            self._show_sections()

    def _show_sections(self) -> None:
        step = self.step
        if step is None:
            for section in self.query_children(".step-detail--section"):
                section.display = False
            self.has_folded = False
            return
        folded = self.folded
        contents: dict[str, tuple[Content, bool] | None] = {
            "error": payload_content(step["error"], folded) if step.get("error") else None,
            "input": payload_content(step["input"], folded)
            if step.get("input") is not None
            else None,
            "output": payload_content(step["output"], folded)
            if step.get("output") is not None
            else None,
            "decision": (decision_content(step["decision"]), False)
            if step.get("decision")
            else None,
            "metadata": payload_content(step["metadata"], folded) if step.get("metadata") else None,
        }
        snapshot = step.get("snapshot") or {}
        contents["context"] = (
            context_content(snapshot["context_window"], folded)
            if snapshot.get("context_window") is not None
            else None
        )
        contents["environment"] = (
            payload_content(snapshot["environment"], folded)
            if snapshot.get("environment") is not None
            else None
        )
        contents["tool-state"] = (
            payload_content(snapshot["tool_state"], folded)
            if snapshot.get("tool_state") is not None
            else None
        )
        any_folded = False
        for key, _ in SECTIONS:
            shown = contents.get(key)
            if shown is None:
                for section in self.query_children(f"#detail-{key}"):
                    section.display = False
                continue
            content, was_folded = shown
            any_folded |= was_folded
            section = self._section(key)
            section.display = True
            section.update(content)
        self.has_folded = any_folded
