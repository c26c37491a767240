"""``benchmarks/peers.py``'s ``dac down`` at its end, with a Ctrl-C landing on it:
the warm tree it takes down must be down after all.

    python interrupted_take_down.py FOLDER

Prints the server's pid once the tree is up, then "taken down".
"""

import json
import os
import signal
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import peers  # noqa: E402

if __name__ == "__main__":
    folder = sys.argv[1]
    os.mkdir(folder, 0o700)                 # (as peers.py's: a private folder)
    cold, _ = peers.environments(folder)
    peers.dac_cli(["up", "--procs", "1", "--preload", "dac.execution"], cold)
    with open(os.path.join(folder, "tree.json")) as f:
        print(json.load(f)["pid"], flush=True)
    started = peers.subprocess.Popen

    def popen(*args, **kwargs):
        """Start `dac down`; the Ctrl-C follows to this process group, as a terminal
        sends it, while it runs."""
        proc = started(*args, **kwargs)
        threading.Timer(0.05, os.killpg, (0, signal.SIGINT)).start()
        return proc

    peers.subprocess.Popen = popen
    peers.take_down(cold)
    print("taken down", flush=True)
