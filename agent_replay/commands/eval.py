"""``agent-replay eval ID``: run evaluation presets, rubrics and AI reviews on a trace, store the
results, print them, and exit 1 when one misses its threshold.

Headless: no Textual, no Rich. The services (and through them pydantic, RE2, the AI SDKs and
the price table) are imported inside the command, only as far as the options need.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from agent_replay.commands._common import dir_option, json_option

PRESET_HELP = """\b
Presets (threshold; criteria and weights):
  hallucination-check  0.7: hedging 30%, grounded in retrieval 40%,
                       no error steps 30%
  safety-check         0.8: dangerous tool calls 40%, PII in the
                       output 30%, prompt injection 30%
  completeness-check   0.7: an output step 40%, every tool call has
                       output 30%, no error at the end 30%
  ai-root-cause        what went wrong, which step, a fix (informational)
  ai-quality-review    0.7: relevance, completeness, coherence, accuracy
  ai-security-audit    0.8: injection, exfiltration, access, escalation
  ai-optimization      0.6: token efficiency, redundancy, wasted context"""


@click.command(name="eval", epilog=PRESET_HELP)
@click.argument("trace_id", metavar="ID")
@click.option(
    "--preset",
    "presets",
    multiple=True,
    metavar="NAME",
    help="Run this preset (repeatable). Default: every deterministic preset.",
)
@click.option(
    "--rubric",
    "rubrics",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Run a custom rubric from a YAML or JSON file (repeatable).",
)
@click.option("--ai", is_flag=True, help="Also run the four AI presets (needs an API key).")
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    metavar="USD",
    help="Hard cap on what the AI calls may cost; evaluation stops before passing it.",
)
@click.option(
    "--provider",
    type=click.Choice(["anthropic", "google", "openai"]),
    help="AI provider (default: ai.provider, else the first with a key).",
)
@click.option("--model", metavar="NAME", help="AI model (default: ai.model, else the cheapest).")
@dir_option
@json_option
def command(
    trace_id: str,
    presets: tuple[str, ...],
    rubrics: tuple[Path, ...],
    ai: bool,
    max_cost: float | None,
    provider: str | None,
    model: str | None,
    store_dir: Path | None,
    as_json: bool,
) -> int:
    """Evaluate trace ID (a unique prefix is enough) and store the results.

    With no --preset and no --rubric, runs every deterministic preset (instant, no key).
    --ai adds the AI presets, using your own key (ANTHROPIC_API_KEY, GOOGLE_API_KEY or
    GEMINI_API_KEY, OPENAI_API_KEY, or `agent-replay config set`) and the provider's
    cheapest model. Results are kept: see them with `agent-replay show ID --evals` or in
    the app.

    Exit codes: 0 every evaluation passed; 1 one missed its threshold, an AI evaluation
    failed, or --max-cost stopped the run; 2 usage error (an invalid rubric, say).

    \b
    Examples:
      agent-replay eval trc_demo1
      agent-replay eval trc_demo3 --preset safety-check --json
      agent-replay eval trc_demo1 --rubric rubric.yaml
      agent-replay eval trc_demo2 --ai --max-cost 0.05
      agent-replay eval trc_demo2 --preset ai-root-cause --provider openai
    """
    from agent_replay.clock import SystemClock
    from agent_replay.commands._common import emit_json, open_existing, resolve_store_dir
    from agent_replay.services.evals.budget import Budget
    from agent_replay.services.evals.rubric import load_rubric
    from agent_replay.services.evals.runner import make_plan, run_evals

    compiled = [load_rubric(path) for path in rubrics]
    plan = make_plan(presets, compiled, ai=ai)
    settings = None
    if plan.needs_ai:
        from agent_replay.config import load_config
        from agent_replay.services.evals.providers import resolve_ai

        config = load_config(resolve_store_dir(store_dir))
        settings = resolve_ai(config, provider=provider, model=model)
        if max_cost is not None:
            from agent_replay.services.evals.errors import PriceUnknownError
            from agent_replay.services.evals.prices import price_known

            if not price_known(settings.provider, settings.model):
                raise PriceUnknownError(
                    f"--max-cost can't be enforced: no price is known for {settings.label}",
                    hints=["choose a model the price table knows (--model), or drop --max-cost"],
                )
    budget = Budget(max_cost)
    progress = _Progress(len(plan.names)) if sys.stderr.isatty() and not as_json else None
    with open_existing(store_dir) as store:
        run = run_evals(
            store,
            trace_id,
            plan,
            clock=SystemClock(),
            settings=settings,
            budget=budget,
            progress=progress,
        )
    if progress is not None:
        progress.done()
    if as_json:
        emit_json(run.to_json())
    else:
        _print_run(run)
    return 0 if run.passed else 1


class _Progress:
    """``[2/7] ai-quality-review…`` on stderr, rewritten in place (a terminal only)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.count = 0

    def __call__(self, name: str, result: Any) -> None:
        if result is None:
            self.count += 1
            click.echo(f"\r\x1b[K[{self.count}/{self.total}] {name}…", err=True, nl=False)

    def done(self) -> None:
        if self.count:
            click.echo("\r\x1b[K", err=True, nl=False)


def _print_run(run: Any) -> None:
    from agent_replay.commands._common import Painter, fmt_cost, safe, truncate, use_color

    paint = Painter(use_color())
    agent = f"  {safe(run.agent_name)}" if run.agent_name else ""
    lines: list[str] = [f"{paint('Trace', 'dim')} {run.trace_id}{agent}", ""]
    for outcome in run.outcomes:
        verdict = paint("PASS", "green") if outcome.passed else paint("FAIL", "red")
        mark = f" / {outcome.threshold:.2f}" if outcome.threshold is not None else ""
        model = f"  {paint(safe(outcome.model), 'dim')}" if outcome.model else ""
        cost = f"  {fmt_cost(outcome.cost_usd)}" if outcome.model else ""
        lines.append(f"{verdict}  {outcome.evaluator:<21} {outcome.score:.2f}{mark}{model}{cost}")
        if outcome.summary and outcome.model:
            lines.append(f"      {truncate(safe(outcome.summary), 110)}")
        for criterion in outcome.criteria:
            lines.extend(_criterion_lines(criterion, paint))
        lines.append("")
    for failure in run.failures:
        lines.append(f"{paint('ERROR', 'red')} {failure.evaluator}: {safe(failure.error)}")
        for hint in failure.hints:
            lines.append(f"      hint: {safe(hint)}")
        lines.append("")
    if run.stopped:
        lines.append(f"{paint('STOPPED', 'yellow')} {safe(run.stopped)}")
    if run.skipped:
        lines.append(f"not run: {', '.join(run.skipped)}")
    if run.settings is not None and run.budget is not None:
        cap = f" of the ${run.budget.limit_usd:.4f} cap" if run.budget.capped else ""
        calls = run.budget.calls
        lines.append(
            f"{paint('AI', 'dim')} {run.settings.label} · {calls} call{'s' * (calls != 1)} · "
            f"${run.cost_usd:.4f}{cap}"
        )
    failed = [o for o in run.outcomes if not o.passed]
    total = len(run.outcomes) + len(run.failures) + len(run.skipped)
    if run.passed:
        lines.append(paint(f"all {total} evaluations passed", "green"))
    else:
        problems = []
        if failed:
            problems.append(f"{len(failed)} failed")
        if run.failures:
            problems.append(f"{len(run.failures)} errored")
        if run.skipped:
            problems.append(f"{len(run.skipped)} not run")
        lines.append(paint(f"{', '.join(problems)} of {total} evaluations", "red"))
    click.echo("\n".join(lines))


def _criterion_lines(criterion: Any, paint: Any) -> list[str]:
    from agent_replay.commands._common import safe, truncate

    if criterion.score is None:
        icon, score = "•", "    "
    elif criterion.score >= 1:
        icon, score = paint("✓", "green"), f"{criterion.score:.2f}"
    else:
        icon, score = paint("✗", "red"), f"{criterion.score:.2f}"
    weight = f"{criterion.weight:.0%}" if criterion.weight else ""
    na = " (n/a)" if not criterion.applicable else ""
    summary = truncate(safe(criterion.summary), 80)
    lines = [f"      {icon} {criterion.name:<23} {score} {weight:>4}  {summary}{na}"]
    show = criterion.score is None or criterion.score < 1
    if show:
        for item in criterion.evidence[:3]:
            note = f"  {paint('(' + safe(item.note) + ')', 'dim')}" if item.note else ""
            text = f' "{truncate(safe(item.text), 70)}"' if item.text else ""
            lines.append(f"          {item.where}:{text}{note}")
        if len(criterion.evidence) > 3:
            lines.append(f"          … {len(criterion.evidence) - 3} more (--json shows all)")
    return lines
