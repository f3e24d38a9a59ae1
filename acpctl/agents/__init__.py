"""Agents: the built-in catalog, resolution of commands, and version probes."""
