"""A long run for the Ctrl-C and cleanup tests.

    python long_run.py PROCS N|D1,D2,... SECONDS MARK_FILE [LEAF_MODE [TASKS_PER_LEAF]]

N tasks that each sleep SECONDS (or one task per listed duration D1, D2, ...); every
task first appends its process id to MARK_FILE.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import programs  # noqa: E402

import dac  # noqa: E402


def main():
    procs, what, secs, mark = sys.argv[1:5]
    mode = sys.argv[5] if len(sys.argv) > 5 else "persistent"
    per_leaf = int(sys.argv[6]) if len(sys.argv) > 6 else 5
    if "," in what:
        durations = tuple(float(d) for d in what.split(","))
    else:
        durations = (float(secs),) * int(what)
    value = dac.run(programs.naps, durations, mark, procs=int(procs), branches=2, min_procs=2, leaf_mode=mode,
                    tasks_per_leaf=per_leaf)
    print(f"finished {value}", flush=True)


if __name__ == "__main__":
    main()
