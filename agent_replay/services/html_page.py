"""One trace as one self-contained HTML page (``export ID --format html``): the header, the step
timeline with every step's details, the step tree, the decisions, evaluations and annotations.

Readable in any browser, offline: the CSS and the little JavaScript are inline, nothing is
fetched (a Content-Security-Policy forbids it), and without JavaScript every part still reads
(details open with ``<details>``; the filter box and the expand-all button are the only
scripted parts). Everything a producer wrote is HTML-escaped by the template engine (Jinja2 with
autoescaping on, for every value), and JSON payloads are shown as indented text.

No Textual, no Rich.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_replay.display import STEP_EMOJI, fmt_cost, fmt_int, fmt_ms, fmt_time
from agent_replay.services.analysis import decision_points, tree_order
from agent_replay.trace.io import dumps_bytes

TEMPLATE = "trace_page.html.j2"
"""The page's template, beside this module (package data)."""


def _pretty(value: Any) -> str:
    """A payload as readable text: a string as it is, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return dumps_bytes(value, indent=True).decode()


def _one_line(value: Any) -> str:
    text = _pretty(value) if isinstance(value, str) else dumps_bytes(value).decode()
    return " ".join(text.split())


def render_page(trace: Mapping[str, Any]) -> str:
    """The page of a full trace object (``store.trace_detail.trace_json``), as HTML text."""
    import jinja2  # deferred: only `export --format html` renders pages

    from agent_replay import __version__

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("agent_replay.services", ""),
        autoescape=True,  # every value: producer text is data, never markup
        undefined=jinja2.StrictUndefined,
    )
    template = environment.get_template(TEMPLATE)
    steps = trace.get("steps") or []
    annotations = trace.get("annotations") or []
    step_labels: dict[int, list[dict[str, Any]]] = {}
    for annotation in annotations:
        if annotation["step_number"] is not None:
            step_labels.setdefault(annotation["step_number"], []).append(annotation)
    return template.render(
        t=trace,
        steps=steps,
        tree=tree_order(steps),
        decisions=decision_points(steps),
        run_labels=[a for a in annotations if a["step_number"] is None],
        step_labels=step_labels,
        icons=STEP_EMOJI,
        js=_pretty,
        js1=_one_line,
        fmt_time=fmt_time,
        fmt_ms=fmt_ms,
        fmt_int=fmt_int,
        fmt_cost=fmt_cost,
        version=__version__,
    )
