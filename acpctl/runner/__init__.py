"""`acpctl run`: the ACP server the editor talks to, and the agents behind it."""
