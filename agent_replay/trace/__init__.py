"""The trace format (pydantic models) and its validation. No I/O; never imports the store."""
