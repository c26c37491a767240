"""Shared by the benchmarks: run a command and time it from outside."""

import subprocess
import time


def timed_run(cmd, cwd=None, env=None):
    """Run ``cmd``; returns (seconds from outside, stdout). Raises with its stderr on
    failure, so a broken run never passes for a fast one."""
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s" % (res.returncode, " ".join(cmd),
                                                            res.stderr[-3000:]))
    return seconds, res.stdout
