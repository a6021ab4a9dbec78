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

from typing import Any

from agent_replay.display import fmt_cost, fmt_int, fmt_ms, fmt_time
from agent_replay.services.analysis import decision_points, tree_order
from agent_replay.trace.io import dumps_bytes

STEP_ICONS = {
    "thought": "💭",
    "tool_call": "🔧",
    "llm_call": "🤖",
    "retrieval": "📚",
    "output": "📤",
    "decision": "🔀",
    "error": "❌",
    "guard_check": "🛡",
}

_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="generator" content="agent-replay {{ version }}">
<title>{{ t.agent_name }} · {{ t.id }} · agent-replay</title>
<style>
:root { --bg:#0f1117; --panel:#171a23; --line:#2a2f3d; --text:#e6e8ee; --dim:#9aa3b5;
  --accent:#7aa2f7; --ok:#5fd38d; --bad:#ff6b6b; --warn:#f2c14e; --fork:#c792ea; }
@media (prefers-color-scheme: light) { :root { --bg:#f7f8fa; --panel:#fff; --line:#dde1e8;
  --text:#1c2030; --dim:#5b6475; --accent:#2f5bd3; --ok:#198a4b; --bad:#c62828;
  --warn:#a86b00; --fork:#8b3fc2; } }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--text);
  font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; }
header, main { max-width: 1200px; margin: 0 auto; padding: 16px 24px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 10px; }
code, pre, .mono { font-family: ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:12.5px; }
pre { white-space: pre-wrap; word-break: break-word; margin: 4px 0 8px; padding: 8px 10px;
  background: var(--bg); border: 1px solid var(--line); border-radius: 6px; max-height: 420px;
  overflow: auto; }
.dim { color: var(--dim); }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px;
  border:1px solid currentColor; }
.completed { color: var(--ok); } .failed { color: var(--bad); } .timeout { color: var(--warn); }
.running { color: var(--accent); } .forked { color: var(--fork); }
.facts { display:grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin-top: 10px; }
.facts dt { color: var(--dim); } .facts dd { margin: 0; }
nav a { color: var(--accent); margin-right: 14px; text-decoration: none; }
.toolbar { display:flex; gap: 10px; align-items:center; margin: 8px 0; }
.toolbar input { flex: 1; max-width: 360px; padding: 5px 8px; background: var(--panel);
  color: var(--text); border: 1px solid var(--line); border-radius: 6px; }
.toolbar button { padding: 5px 10px; background: var(--panel); color: var(--text);
  border:1px solid var(--line); border-radius: 6px; cursor: pointer; }
.step { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
  margin: 6px 0; }
.step > summary { cursor: pointer; padding: 7px 12px; display: grid;
  grid-template-columns: 56px 28px 110px 1fr auto; gap: 8px; align-items: baseline;
  list-style: none; }
.step > summary::-webkit-details-marker { display: none; }
.step.error-step { border-color: var(--bad); }
.step .num { color: var(--dim); text-align: right; } .step .type { color: var(--dim); }
.step .name { font-weight: 600; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.step .meta { color: var(--dim); font-size: 12px; white-space: nowrap; }
.step .body { padding: 0 14px 10px 104px; }
.step .preview { grid-column: 4 / 6; color: var(--dim); font-size: 12.5px; overflow: hidden;
  text-overflow: ellipsis; white-space: nowrap; }
.err { color: var(--bad); }
.label { color: var(--fork); font-weight: 600; }
.tree { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
  padding: 8px 14px; }
.tree div { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.tree a { color: var(--text); text-decoration: none; } .tree a:hover { color: var(--accent); }
.indent { color: var(--line); }
table { border-collapse: collapse; width: 100%; }
td, th { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { color: var(--dim); font-weight: normal; }
.chosen { color: var(--ok); font-weight: 600; }
footer { max-width: 1200px; margin: 24px auto; padding: 0 24px; color: var(--dim); font-size: 12px; }
</style>
</head>
<body>
<header>
  <h1>{{ t.agent_name }}{% if t.agent_version %} <span class="dim">{{ t.agent_version }}</span>{% endif %}
    <span class="badge {{ t.status }}" id="status">{{ t.status }}</span></h1>
  <div class="mono dim" id="trace-id">{{ t.id }}</div>
  <dl class="facts">
    <dt>Started</dt><dd>{{ fmt_time(t.started_at) }} UTC</dd>
    <dt>Duration</dt><dd>{{ fmt_ms(t.total_duration_ms) }}</dd>
    <dt>Steps</dt><dd>{{ steps|length }}</dd>
    <dt>Tokens</dt><dd>{{ fmt_int(t.total_tokens) }}</dd>
    <dt>Cost</dt><dd>{{ fmt_cost(t.total_cost_usd) }}</dd>
    {% if t.session_id %}<dt>Session</dt><dd class="mono">{{ t.session_id }}</dd>{% endif %}
    {% if t.trigger %}<dt>Trigger</dt><dd>{{ t.trigger }}</dd>{% endif %}
    {% if t.parent_trace_id %}<dt>Fork of</dt><dd class="mono">{{ t.parent_trace_id }} at step {{ t.forked_from_step }}</dd>{% endif %}
    {% if t.tags %}<dt>Tags</dt><dd>{{ t.tags|join(", ") }}</dd>{% endif %}
    {% for a in run_labels %}<dt>{% if loop.first %}Labels{% endif %}</dt><dd><span class="label">{{ a.label }}</span>{% if a.score is not none %} {{ a.score }}{% endif %}{% if a.author %} <span class="dim">({{ a.author }})</span>{% endif %}{% if a.note %}: {{ a.note }}{% endif %}</dd>{% endfor %}
    {% if t.error %}<dt>Error</dt><dd class="err">{{ t.error }}</dd>{% endif %}
  </dl>
  {% if t.input is not none %}<h2>Input</h2><pre>{{ js(t.input) }}</pre>{% endif %}
  {% if t.output is not none %}<h2>Output</h2><pre>{{ js(t.output) }}</pre>{% endif %}
  <nav><a href="#timeline">Timeline</a><a href="#tree">Tree</a><a href="#decisions">Decisions ({{ decisions|length }})</a>{% if t.evals %}<a href="#evals">Evaluations ({{ t.evals|length }})</a>{% endif %}</nav>
</header>
<main>
<section id="timeline">
  <h2>Timeline</h2>
  <div class="toolbar">
    <input id="filter" type="search" placeholder="Filter steps: type, name or text" aria-label="Filter steps">
    <button id="expand" type="button">Expand all</button>
    <span class="dim" id="shown"></span>
  </div>
  {% for s in steps %}
  <details class="step{% if s.error %} error-step{% endif %}" id="step-{{ s.step_number }}" data-type="{{ s.step_type }}">
    <summary><span class="num">#{{ s.step_number }}</span><span>{{ icons.get(s.step_type, "•") }}</span><span class="type">{{ s.step_type }}</span><span class="name">{{ s.name or "" }}{% for a in step_labels.get(s.step_number, []) %} <span class="label">✎ {{ a.label }}</span>{% endfor %}</span><span class="meta">{% if s.duration_ms is not none %}{{ fmt_ms(s.duration_ms) }}{% endif %}{% if s.tokens_used is not none %} · {{ fmt_int(s.tokens_used) }} tok{% endif %}{% if s.model %} · {{ s.model }}{% endif %}{% if s.caused_by_step %} · ← #{{ s.caused_by_step }}{% endif %}</span>
      {% if s.error %}<span class="preview err">{{ s.error|truncate(160) }}</span>{% elif s.decision %}<span class="preview">→ chose {{ s.decision.chosen|truncate(140) }}</span>{% elif s.output is not none %}<span class="preview">→ {{ js1(s.output)|truncate(160) }}</span>{% endif %}
    </summary>
    <div class="body">
      {% for a in step_labels.get(s.step_number, []) %}<div><span class="label">✎ {{ a.label }}</span>{% if a.score is not none %} {{ a.score }}{% endif %}{% if a.author %} <span class="dim">({{ a.author }})</span>{% endif %}{% if a.note %}: {{ a.note }}{% endif %}</div>{% endfor %}
      <div class="dim mono">{{ s.id }}{% if s.started_at %} · {{ fmt_time(s.started_at) }}{% endif %}{% if s.parent_step %} · inside #{{ s.parent_step }}{% endif %}</div>
      {% if s.input is not none %}<div class="dim">input</div><pre>{{ js(s.input) }}</pre>{% endif %}
      {% if s.output is not none %}<div class="dim">output</div><pre>{{ js(s.output) }}</pre>{% endif %}
      {% if s.error %}<div class="dim">error</div><pre class="err">{{ s.error }}</pre>{% endif %}
      {% if s.decision %}<div class="dim">decision</div><pre>{{ js(s.decision) }}</pre>{% endif %}
      {% if s.snapshot %}<div class="dim">snapshot</div><pre>{{ js(s.snapshot) }}</pre>{% endif %}
      {% if s.metadata %}<div class="dim">metadata</div><pre>{{ js(s.metadata) }}</pre>{% endif %}
    </div>
  </details>
  {% else %}<p class="dim">(no steps)</p>{% endfor %}
</section>
<section id="tree">
  <h2>Tree</h2>
  <div class="tree mono">
  {% for depth, s in tree %}<div><span class="indent">{{ "│  " * depth }}</span><a href="#step-{{ s.step_number }}">#{{ s.step_number }} {{ icons.get(s.step_type, "•") }} {{ s.step_type }} {{ s.name or "" }}</a>{% if s.caused_by_step %} <span class="dim">← caused by #{{ s.caused_by_step }}</span>{% endif %}</div>
  {% else %}<div class="dim">(no steps)</div>{% endfor %}
  </div>
</section>
<section id="decisions">
  <h2>Decisions</h2>
  {% for d in decisions %}
  <div class="step" style="padding:8px 14px">
    <div><a href="#step-{{ d.step_number }}">#{{ d.step_number }}</a> <b>{{ d.name or "" }}</b> <span class="dim">by {{ d.decided_by }}{% if d.confidence is not none %}, confidence {{ "%.2f"|format(d.confidence) }}{% endif %}</span></div>
    <div>chose <span class="chosen">{{ d.chosen }}</span>{% if d.rationale %} — {{ d.rationale }}{% endif %}</div>
    {% if d.options %}<table><tr><th></th><th>option</th><th>score</th><th>rationale</th></tr>
    {% for o in d.options %}<tr><td>{% if o.option == d.chosen %}●{% else %}○{% endif %}</td><td{% if o.option == d.chosen %} class="chosen"{% endif %}>{{ o.option }}</td><td>{% if o.score is not none %}{{ "%.2f"|format(o.score) }}{% endif %}</td><td>{{ o.rationale or "" }}</td></tr>{% endfor %}
    </table>{% endif %}
  </div>
  {% else %}<p class="dim">(no decision points recorded)</p>{% endfor %}
</section>
{% if t.evals %}
<section id="evals">
  <h2>Evaluations</h2>
  <table><tr><th>evaluator</th><th>score</th><th>threshold</th><th>verdict</th><th>model</th></tr>
  {% for e in t.evals %}<tr><td>{{ e.evaluator }}</td><td>{{ "%.2f"|format(e.score) }}</td><td>{% if e.threshold is not none %}{{ "%.2f"|format(e.threshold) }}{% endif %}</td><td class="{{ 'completed' if e.passed else 'failed' }}">{{ "pass" if e.passed else "FAIL" }}</td><td>{{ e.model or "" }}</td></tr>{% endfor %}
  </table>
</section>
{% endif %}
</main>
<footer>Exported by agent-replay {{ version }}. Everything above was recorded from an agent run; it is shown as text, never run.</footer>
<script>
(function () {
  var steps = Array.prototype.slice.call(document.querySelectorAll("details.step"));
  var filter = document.getElementById("filter"), shown = document.getElementById("shown");
  var expand = document.getElementById("expand"), open = false;
  function apply() {
    var q = filter.value.trim().toLowerCase(), n = 0;
    steps.forEach(function (el) {
      var hit = !q || el.textContent.toLowerCase().indexOf(q) >= 0;
      el.style.display = hit ? "" : "none"; if (hit) n++;
    });
    shown.textContent = q ? n + " of " + steps.length + " steps" : steps.length + " steps";
  }
  filter.addEventListener("input", apply);
  expand.addEventListener("click", function () {
    open = !open; steps.forEach(function (el) { el.open = open; });
    expand.textContent = open ? "Collapse all" : "Expand all";
  });
  function openHash() {
    var el = document.getElementById(location.hash.slice(1));
    if (el && el.tagName === "DETAILS") el.open = true;
  }
  window.addEventListener("hashchange", openHash); openHash(); apply();
})();
</script>
</body>
</html>
"""


def _pretty(value: Any) -> str:
    """A payload as readable text: a string as it is, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return dumps_bytes(value, indent=True).decode()


def _one_line(value: Any) -> str:
    text = _pretty(value) if isinstance(value, str) else dumps_bytes(value).decode()
    return " ".join(text.split())


def render_page(trace: dict[str, Any]) -> str:
    """The page of a full trace object (``store.queries.trace_json``), as HTML text."""
    import jinja2  # deferred: only `export --format html` renders pages

    from agent_replay import __version__

    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = environment.from_string(_TEMPLATE)
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
        icons=STEP_ICONS,
        js=_pretty,
        js1=_one_line,
        fmt_time=fmt_time,
        fmt_ms=fmt_ms,
        fmt_int=fmt_int,
        fmt_cost=fmt_cost,
        version=__version__,
    )
