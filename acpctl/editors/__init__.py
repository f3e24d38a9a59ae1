"""Editors and other ACP clients: where each keeps its agents, and the safe edit of those
files (jsonc.py: the format-preserving editor; settings_file.py: lock, backup, atomic write)."""
