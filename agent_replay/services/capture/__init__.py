"""Live capture: the native event protocol, stream formats, harness hooks, importers and the
process wrapper. Every path writes through ``TraceRecorder`` (lenient, redacting by default).
"""
