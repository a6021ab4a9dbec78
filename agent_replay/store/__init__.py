"""The store: peewee models, connection and pragmas, migrations, and queries returning domain
objects. Depends on ``agent_replay.trace`` only; never on services, the CLI or Textual."""
