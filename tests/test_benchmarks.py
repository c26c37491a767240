"""The benchmarks still run: each in a quick mode, with right answers (their figures are
for the closing notes, never asserted here)."""

import json
import math
import os
import signal
import sys
import time

import pytest
from proctools import finish, launch, new_tag, tagged_pids, wait_for, wait_for_no_processes
from test_fault_tolerance import ulfm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_benchmark(*args, timeout=300):
    tag = new_tag()
    code, out, err, _ = finish(launch([sys.executable, *args], tag, cwd=ROOT), timeout)
    assert wait_for_no_processes(tag, timeout=10) == {}
    return code, out, err


def test_peers_runs_every_way_with_the_right_count():
    code, out, err = run_benchmark("benchmarks/peers.py", "--n", "9", "--repeat", "1",
                                   "--json")
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    ways = {"seq", "pool", "ppe", "mpi4py", "dac-cold", "dac-advice", "dac-warm"}
    assert report["skipped"] == {}
    for mode in ("whole", "compute"):
        rows = [r for r in report["figures"] if r["mode"] == mode and r["n"] == 9]
        assert {r["way"] for r in rows} == ways
        assert all(r["min_s"] > 0 and r["speedup"] > 0 for r in rows)
    assert "N = 9, whole command" in out and "dac-warm" in out
    assert not os.path.exists(report["tree_folder"])       # the warm tree is down



def test_gpu_nqueens_runs_in_the_simulator_with_the_right_counts():
    code, out, err = run_benchmark("benchmarks/gpu_nqueens.py", "--n", "7", "8",
                                   "--simulate", "--depth", "2", "--gpu-depths", "3",
                                   "--run-depth", "2", "--repeat", "1", timeout=600)
    assert code == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert [r["n"] for r in report["rates"]] == [7, 8]
    assert all(r["cpu_rate"] > 0 and r["gpu_rate"] > 0 for r in report["rates"])
    # the boards of N = 8: 42 at depth 2, 140 at depth 3 (each counted to 92)
    assert {(g["depth"], g["boards"]) for g in report["gpu_alone"]} == {(2, 42), (3, 140)}
    names = [r["name"] for r in report["runs"]]
    assert names[0] == "GPU leaf + 1 CPU leaf" and names[2].endswith("CPU leaves")
    for run in report["runs"]:
        assert run["tasks"] == 42 and len(run["times"]) == 1
    assert report["runs"][2]["gpu_tasks"] == 0 and report["runs"][2]["largest_batch"] is None


def test_a_ctrl_c_on_peers_last_dac_down_still_takes_the_tree_down(tmp_path):
    """peers.py ends with ``dac down``; a Ctrl-C landing on it cut it short and the
    warm tree outlived the benchmark (CI: its processes left after the Ctrl-C test)."""
    tag = new_tag()
    script = os.path.join(ROOT, "tests", "scripts", "interrupted_take_down.py")
    code, out, err, _ = finish(launch([sys.executable, script, str(tmp_path / "tree")],
                                      tag), 120)
    assert code == 0 and out.split()[1:] == ["taken", "down"], (code, out, err[-2000:])
    server = int(out.split()[0])
    assert "taking the warm tree down first" in err
    assert wait_for(lambda: server not in tagged_pids(tag), 10)     # (not a zombie)
    assert wait_for_no_processes(tag, timeout=10) == {}


def test_the_memory_of_a_run_counts_shared_pages_once():
    """``benchmarks/_memory.py``: PSS, read for live processes only; a forked child,
    sharing its parent's pages, adds far less than its parent's own size."""
    # loaded from its file: benchmarks/ on this session's sys.path would make its
    # spine.py and uts.py the modules later tests' leaves import by those names
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "dac_bench_memory", os.path.join(ROOT, "benchmarks", "_memory.py"))
    memory = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(memory)
    held_mb = memory.held_mb
    big = bytearray(64 << 20)                   # 64 MB of this process's own pages
    alone, count = held_mb([os.getpid()])
    assert count == 1 and alone > 64
    child = os.fork()
    if child == 0:
        time.sleep(30)
        os._exit(0)
    try:
        both, count = held_mb([os.getpid(), child, 2 ** 22 + 1])    # (no such pid)
        assert count == 2 and both < alone + 16, (alone, both)
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    del big

def test_work_first_measures_every_program_with_right_answers():
    code, out, err = run_benchmark("benchmarks/work_first.py", "--quick", "--repeat", "1",
                                   "--tuned", "1")
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["procs"] == 2 and report["promotion_ns"] > 0
    rows = {r["program"]: r for r in report["programs"]}
    assert list(rows) == ["fib 18", "Langford 7", "N-Queens 8", "UTS default",
                          "comb 10 x 1 ms", "array sum 0.524288 MB"]
    answers = {"fib 18": "2584", "Langford 7": "52", "N-Queens 8": "92",
               "UTS default": "(1732, 6)", "array sum 0.524288 MB": str(65535 * 65536 // 2)}
    for name, answer in answers.items():
        assert rows[name]["answer"] == answer and rows[name]["wrong"] == "[]"
    assert rows["fib 18"]["spawns"] == 8360
    assert rows["array sum 0.524288 MB"]["spawns"] == 30     # 16 pieces of 4096
    for r in rows.values():
        assert set(r["seconds"]) == {"plain", "elision", "alone", "pair", "whole", "compute",
                                     "leaves_cpu", "started", "depth=1"}
        # the default and the tuned depth, each a job on a started tree
        assert r["default_over_tuned"] == pytest.approx(
            r["seconds"]["started"][0] / r["seconds"]["depth=1"][0], rel=0.03)  # (rounded)
        # each program's own ceiling: its elision alone over two copies side by side
        assert len(r["ceilings"]) == 1 and r["ceiling"] == r["ceilings"][0] > 0
        assert r["of_ceiling"] == pytest.approx(r["speedup_compute"] / r["ceiling"],
                                                rel=0.01, abs=0.002)
        assert len(r["promoted"]) == 1 and r["promoted"][0] >= 0
        low, high = r["promotions_per_s"]
        assert 0 <= low <= high
        assert r["speedup_compute"] > 0 and r["elision_over_plain"] > 0
        assert r["inflation"] > 0 and r["leaf_s"] > 0 and r["best_depth"] == 1
    assert "ceiling: two copies" in out and "a promotion" in out


def test_grow_reproduces_table_6_6_in_a_quick_run():
    code, out, err = run_benchmark("benchmarks/grow.py", "--quick", "--json")
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert set(report) == {"half", "grow", "all"}
    grown = report["grow"]["runs"][0]
    assert grown["leaves_added"] == 2 and grown["added_tasks"] >= 1
    assert all(r["leaves_added"] == 0 for w in ("half", "all") for r in report[w]["runs"])
    assert "Table 6.6 reproduced" in out and "grow/half" in out


@ulfm
def test_lost_leaf_measures_one_loss_in_a_quick_run():
    code, out, err = run_benchmark("benchmarks/lost_leaf.py", "--quick", "--json")
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert [r["lost"] for r in report["clean"]] == [0]
    assert [r["lost"] for r in report["lose one"]] == [1]
    assert report["lose one"][0]["redone"] >= 1
    assert "one lost leaf" in out and "extra" in out


def test_timeline_cost_runs_both_ways_in_a_quick_run():
    code, out, err = run_benchmark("benchmarks/timeline_cost.py", "--quick", "--json")
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert len(report["times"]["with"]) == len(report["times"]["without"]) == 1
    assert report["page_bytes"] > 1000 and "target <= 3%" in out


THESIS = {"table_6_2.py": "beside the thesis", "figure_6_2.py": "Figure 6.2 reproduced",
          "table_6_4.py": "Table 6.4 reproduced", "section_6_4_1.py": "§6.4.1 reproduced",
          "table_6_5.py": "Table 6.5 reproduced"}


@pytest.mark.parametrize("script", sorted(THESIS))
def test_each_thesis_benchmark_runs_in_a_quick_mode(script, tmp_path):
    """Each prints its table, the thesis' figures beside ours, and writes its figure
    (with matplotlib installed: the plot extra)."""
    image = tmp_path / "figure.png"
    code, out, err = run_benchmark(f"benchmarks/thesis/{script}", "--quick", "--figure",
                                   str(image))
    assert code == 0, err
    assert THESIS[script] in out and "thesis" in out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "needs matplotlib" in out
    else:
        assert f"figure written to {image}" in out
        assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_flat_spawn_runs_both_ways_in_a_quick_run():
    code, out, err = run_benchmark("benchmarks/flat_spawn.py", "--quick")
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    split, pool = report["runs"]["split"][0], report["runs"]["pool"][0]
    assert split["tasks"] == 1 + split["split_tasks"] and split["split_tasks"] >= 1
    assert pool["tasks"] == 80 and pool["split_tasks"] == 0
    assert "split off the one task" in out and "from the root's pool" in out


def test_spawn_cost_measures_calls_entries_and_a_promotion():
    code, out, err = run_benchmark("benchmarks/spawn_cost.py", "--calls", "3000",
                                   "--repeat", "1", "--json")
    assert code == 0, err
    rows = json.loads(out.strip().splitlines()[-1])
    assert set(rows) == {"call", "call+sync", "plain call", "UTS node", "promotion",
                         "over plain"}
    assert set(rows["over plain"]) == {"spawn", "spawn+sync"}
    assert all(math.isfinite(v) for v in rows["over plain"].values())
    for name in ("call", "call+sync", "plain call", "UTS node"):
        assert set(rows[name]) == {"elision", "leaf"}
        assert all(v > 0 for v in rows[name].values())
    assert rows["promotion"]["ns"] > 0


def test_array_transfer_times_both_ways_against_a_copy():
    code, out, err = run_benchmark("benchmarks/array_transfer.py", "--sizes", "1",
                                   "--repeat", "1", "--json")
    assert code == 0, err
    rows = json.loads(out.strip().splitlines()[-1])
    assert set(rows) == {"1"} and set(rows["1"]) == {"to a leaf", "back", "copy",
                                                     "to a leaf beyond a run", "run ms",
                                                     "16 at once"}
    assert all(v > 0 for v in rows["1"].values())


def test_a_thesis_benchmark_interrupted_says_so_in_one_line(tmp_path):
    """Ctrl-C while a library handles an error of its own (as PIL does while a figure
    is saved): exit 130 and one line, not a traceback naming that error (the CI's
    check of Ctrl-C on the long benchmarks found "AttributeError" in one)."""
    import subprocess
    thesis = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "benchmarks", "thesis")
    script = tmp_path / "interrupted.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {thesis!r})\nfrom _common import run_main\n"
        "def main():\n    try:\n        None.fileno()\n    except AttributeError:\n"
        "        raise KeyboardInterrupt\n"
        "run_main(main, 'figure_x')\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 130
    assert done.stderr == "figure_x: interrupted\n"


def test_split_latency_pairs_every_split_of_a_quick_run():
    """``benchmarks/split_latency.py`` on the small UTS tree: the right count, and a
    delay for the splits its runs made (its trace folder removed after)."""
    code, out, err = run_benchmark("benchmarks/split_latency.py", "--tree", "default",
                                   "--repeat", "2")
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["correct"] is True and report["program"] == "UTS default"
    assert len(report["runs"]) == 2
    for run in report["runs"]:
        assert run["splits"] >= 0 and run["max_ms"] >= run["median_ms"] >= 0
    assert "UTS default:" in out and "splits, median" in out
    assert not os.path.exists(report["traces"])
