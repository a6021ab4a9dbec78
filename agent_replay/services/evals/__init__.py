"""Evaluating traces: deterministic presets, custom rubrics and AI reviews, and their results.

Modules:
    results      what an evaluation produces (``EvalOutcome``: score, verdict, criteria with
                 evidence) and the shape stored in the ``evals`` table.
    text         which text of a trace each check reads (output texts, every text; values,
                 never JSON keys).
    presets      the deterministic presets: hallucination-check, safety-check,
                 completeness-check. Instant, no key.
    rubric       custom rubrics (YAML/JSON: regex criteria run with RE2, in linear time).
    ai           the AI presets (ai-root-cause, ai-quality-review, ai-security-audit,
                 ai-optimization): prompts, reply schemas, scoring.
    ask          asking a model for JSON (validated, retried once), what each call costs,
                 and how much trace text the budget leaves room for.
    providers    one call to Anthropic, Google or OpenAI through the official SDK.
    prompt       the trace as untrusted, fenced data, summarized to fit a size.
    prices       token prices (the maintained ``genai-prices`` table) and cost estimates.
    budget       the ``--max-cost`` cap every AI call is checked against.
    runner       ``run_evals``: a plan of evaluators over one trace, results stored as they
                 complete.
    records      reading and writing the ``evals`` rows.
    divergence   ``explain_divergence``: an AI account of why two traces diverged.
    rerun        ``rerun_llm_step``: re-send a recorded llm_call's messages (``fork --rerun``).

Never imports Textual or Rich. The AI SDKs and the price table are imported only when an AI
call is actually made (they cost ~0.5-3 s to import; deterministic evals never pay).
"""
