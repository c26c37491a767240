"""The live progress line: on a terminal a run longer than ~2 s shows it on stderr and
wipes it at the end; in a pipe, or with ``dac run --quiet``, nothing is shown."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from proctools import new_tag, tagged_env, wait_for_no_processes

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = """
import time
import dac

@dac.spawn
def nap(ms):
    time.sleep(ms / 1000.0)
    return 1

@dac.spawn(depth=1)
def naps(n, ms):
    return sum(dac.sync(*[nap(ms) for _ in range(n)]))

print("value", dac.run(naps, 60, 100.0, procs=2))
"""


def run(tmp_path, args, terminal: bool) -> tuple:
    """``(stdout, stderr as bytes)`` of the script, its stderr a pseudo-terminal or a
    pipe."""
    script = tmp_path / "naps.py"
    script.write_text(SCRIPT)
    tag = new_tag()
    env = tagged_env(tag)
    env.pop("DAC_PROGRESS", None)
    cmd = [a.replace("SCRIPT", str(script)) for a in args]
    if not terminal:
        done = subprocess.run(cmd, cwd=CHECKOUT, env=env, capture_output=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.decode(), done.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=CHECKOUT, env=env, stdout=subprocess.PIPE,
                            stderr=slave)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:             # the terminal closed: every writer is gone
            break
        if not chunk:
            break
        err += chunk
    out = proc.stdout.read().decode()
    assert proc.wait(timeout=60) == 0, err
    os.close(master)
    assert not wait_for_no_processes(tag, timeout=5)
    return out, err


def test_a_long_run_on_a_terminal_shows_one_live_line(tmp_path):
    out, err = run(tmp_path, [sys.executable, "SCRIPT"], terminal=True)
    assert "value 60" in out
    lines = err.split(b"\r")
    shown = [x for x in lines if x.startswith(b"\x1b[Kdac: ")]
    assert len(shown) >= 2                  # redrawn, in place
    first = shown[0].decode()
    assert "/60 tasks" in first and "leaves at work" in first and "steals" in first
    assert first.rstrip().endswith(" s")
    assert err.endswith(b"\r\x1b[K")        # wiped at the end
    assert b"\n" not in err.replace(b"\r\n", b"")   # one line, never scrolled


def test_no_line_in_a_pipe(tmp_path):
    out, err = run(tmp_path, [sys.executable, "SCRIPT"], terminal=False)
    assert "value 60" in out
    assert b"tasks" not in err and b"\r" not in err


def test_dac_run_quiet_shows_no_line_on_a_terminal(tmp_path):
    dac_run = [sys.executable, "-c", "import sys; from launcher.cli import main; "
               "sys.exit(main())", "run"]
    out, err = run(tmp_path, dac_run + ["--quiet", "SCRIPT"], terminal=True)
    assert "value 60" in out
    assert b"tasks" not in err and b"with MPICH" not in err
    out, err = run(tmp_path, dac_run + ["SCRIPT"], terminal=True)
    assert b"/60 tasks" in err


def test_progress_option_is_checked():
    import pytest

    import dac
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        dac.Runtime(procs=1, progress="yes")
