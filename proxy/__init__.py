"""Everything with I/O: the wire protocol, sessions, the upstream relay, the ledger, the CLI.

Two kinds of rooms, kept apart: ``proxy.wire`` handles bytes (codec, state machine, server,
sessions, relay, authentication); the other modules are services (embedded PostgreSQL,
provisioning, ledger and epochs, query log, admin commands, CLI, configuration).
"""
