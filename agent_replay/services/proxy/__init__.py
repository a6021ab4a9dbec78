"""The recording and replaying model proxy (``agent-replay proxy``).

An agent points its model base URL at the proxy; every exchange with Anthropic Messages,
OpenAI Chat Completions and Responses, and Gemini ``generateContent`` /
``streamGenerateContent`` is forwarded byte for byte (streams chunk by chunk) and recorded
through the one write path as an ``llm_call`` step. In replay mode the recorded responses are
served again, byte-identical, for the recorded prefix of a trace, and the re-run is recorded as
a fork of it.

Modules:
    apis: what each provider API looks like: routing, the request hash, a request's prompt.
    replies: reading a reply (one body or the API's stream) into text, tool calls, usage.
    answers: what the proxy answers itself: error bodies, ``--override`` responses.
    session: which trace an exchange belongs to (session headers, the client process).
    recording: the writer thread that turns exchanges into steps (through ``TraceRecorder``).
    replay: the recorded exchanges of a trace, the matching state and the re-run's fork.
    server: the aiohttp server and client that move the bytes.
    rerun: the command line that re-runs a session from a step (the TUI's ``R``).

Headless: nothing here imports Textual or Rich.
"""
