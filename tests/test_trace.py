"""DAC_TRACE_DIR: every process of a run writes the messages it sends and takes."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SCRIPT = """
import sys
sys.path[:0] = [{root!r}, {here!r}]
import dac, programs
print(dac.run(programs.fib, 16, procs=4, min_procs=2, branches=2, depth=3))
"""


def test_trace_files_hold_every_process_messages(tmp_path):
    out = tmp_path / "trace"
    env = dict(os.environ, DAC_TRACE_DIR=str(out))
    run = subprocess.run([sys.executable, "-c", SCRIPT.format(root=ROOT, here=HERE)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["987"]
    files = list(out.iterdir())
    assert len(files) == 7                      # one per process: its pid
    lines = [ln.split(" ", 5) for f in files for ln in f.read_text().splitlines()]
    assert {ln[1] for ln in lines} == {"root", "router/0", "router/1", "leaf/0/0",
                                       "leaf/0/1", "leaf/1/0", "leaf/1/1"}
    seen = {(who, way, link, tag) for _, who, way, link, tag, *_ in lines}
    assert ("root", "send", "0", "TASKS") in seen
    assert ("router/0", "take", "up", "TASKS") in seen
    assert ("router/1", "send", "1", "TASKS") in seen
    assert ("leaf/1/1", "take", "up", "TASKS") in seen
    assert ("leaf/0/1", "send", "up", "RESULTS") in seen
    assert ("leaf/1/0", "take", "up", "STOP") in seen
    assert ("root", "take", "1", "BYE") in seen
    tasks = [ln for ln in lines if ln[1] == "root" and ln[2] == "send" and ln[4] == "TASKS"]
    assert tasks[0][5].startswith("Tasks(tasks=")    # lists show as their length (and ids)
    from stealing.observe.trace import delivery_delays
    down = [ln for ln in lines if ln[2] == "send" and ln[3] != "up" and ln[4] == "TASKS"]
    delays = delivery_delays([ln for f in files for ln in f.read_text().splitlines()],
                             "TASKS")
    assert len(delays) == len(down) > 0         # every batch sent down was taken
    assert all(0 <= d < 60 for d, _, _ in delays)
    assert {who for _, _, who in delays} <= {"router/0", "router/1", "leaf/0/0",
                                             "leaf/0/1", "leaf/1/0", "leaf/1/1"}


def test_delivery_delays_pair_each_send_with_its_take_in_order():
    """A message sent down is paired with its receiver's takes in order, whoever
    wrote the lines first; one never taken is left out, and other tags and
    messages going up are not counted."""
    from stealing.observe.trace import delivery_delays
    lines = [
        "10.000000 root send 1 SPLIT Split(want=5)",
        "10.000100 leaf/0 send up RESULTS Results(results=0, want=5)",
        "10.050000 root send 1 SPLIT Split(want=3)",
        "10.001000 router/0 send 2 SPLIT Split(want=1)",
        "10.040000 leaf/1 take up SPLIT Split(want=5)",
        "10.050500 leaf/1 take up SPLIT Split(want=3)",
        "10.003000 leaf/0/2 take up SPLIT Split(want=1)",
        "10.060000 root send 0 SPLIT Split(want=2)",     # the run ended first
        "10.000200 root take 0 RESULTS Results(results=0, want=5)",
    ]
    got = [(round(d, 6), at, who) for d, at, who in delivery_delays(lines, "SPLIT")]
    assert got == [(0.04, 10.0, "leaf/1"), (0.002, 10.001, "leaf/0/2"),
                   (0.0005, 10.05, "leaf/1")]
