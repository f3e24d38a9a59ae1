"""`acpctl doctor`: find what is wrong, from live probes, configs and logs."""
