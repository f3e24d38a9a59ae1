"""The session host, `acpctl serve`: agents and their sessions that outlive the clients,
several clients on one session, over a unix socket and ACP's remote transport.
docs/remote.md has the design and the threat model."""
