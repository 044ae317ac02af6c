"""The wire: PostgreSQL protocol 3.0 codec, state machine, server, sessions, upstream relay
and client authentication. Bytes are handled here and nowhere else."""
