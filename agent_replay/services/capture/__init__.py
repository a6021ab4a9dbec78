"""Live capture: the native event protocol, stream formats, importers, the session-file
follower of hook traces and the process wrapper (the harness hook itself is
``services/hook``). Every path writes through ``TraceRecorder`` (lenient, redacting by
default).

The native protocol: ``protocol`` (event fields, coercions, the report), ``event_traces``
(which trace an event goes to), ``events`` (``EventEngine``), ``pump`` (reading a stream and
group commit); ``streams`` maps the harnesses' JSONL streams onto the engine.
"""
