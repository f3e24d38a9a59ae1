"""`acpctl run` without --acp: a terminal client over the same runner editors use."""
