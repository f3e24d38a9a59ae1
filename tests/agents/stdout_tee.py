"""Runs COMMAND with this process's stdin, and copies each line of its stdout both to this
process's stdout and to LOG: what an agent wrote, in the order it wrote it, for a test to
hold beside what the editor got. Usage: python stdout_tee.py LOG COMMAND [ARGS...]"""

from __future__ import annotations

import subprocess
import sys

log_path, *command = sys.argv[1:]
with open(log_path, "ab") as log:
    child = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert child.stdout is not None
    for line in child.stdout:
        # The log first: a line is in it before anyone can have been given it (a test that
        # reads the log once the editor has a line finds the line there, however loaded).
        log.write(line)
        log.flush()
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    sys.exit(child.wait())
