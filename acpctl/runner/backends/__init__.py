"""Backends: how acpctl talks to the real agent (native ACP relay, pi's RPC)."""
