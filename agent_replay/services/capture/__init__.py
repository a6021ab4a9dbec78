"""Live capture: the native event protocol, stream formats, importers, the session-file
follower of hook traces and the process wrapper (the harness hook itself is
``services/hook``). Every path writes through ``TraceRecorder`` (lenient, redacting by
default).
"""
