"""The `dac` command and the example scripts, run as a user would run them."""

import json
import os
import shutil
import sys

import pytest
from proctools import finish, launch, new_tag, wait_for_no_processes

from stealing import plan_tree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORES = len(os.sched_getaffinity(0))          # the default number of leaves
DAC = shutil.which("dac", path=os.path.dirname(sys.executable)) or "dac"


def run_command(args, timeout=120):
    tag = new_tag()
    proc = launch(args, tag, cwd=ROOT)
    code, out, err, _seconds = finish(proc, timeout)
    assert wait_for_no_processes(tag, timeout=5) == {}
    return code, out, err


@pytest.fixture(scope="module")
def fib_json():
    code, out, err = run_command([DAC, "run", "--json", "examples/fib.py", "20"])
    assert code == 0, err
    return out.rstrip("\n").splitlines()


def test_dac_run_json_last_line(fib_json):
    report = json.loads(fib_json[-1])
    assert report["result"] == 6765
    assert report["elapsed_s"] > 0
    stats = report["stats"]
    for key in ("spawns", "batches", "steals_local", "steals_remote", "steals_failed",
                "startup_s", "tasks", "passes", "depth"):
        assert key in stats, key
    tree = plan_tree(CORES)
    assert stats["spawns"] == sum(1 for n in tree.walk() if n.role != "root")
    assert stats["startup_s"] > 0
    assert stats["tasks"] == sum(p["tasks"] for p in stats["processes"])


def test_dac_run_json_processes(fib_json):
    processes = json.loads(fib_json[-1])["stats"]["processes"]
    assert [p["role"] for p in processes].count("leaf") == CORES
    assert processes[0]["role"] == "root"
    for p in processes:
        for key in ("role", "cluster", "host", "cpu_s", "tasks", "busy_s", "idle_s"):
            assert key in p, (key, p)
        assert p["cluster"] == "local"
        assert p["cpu_s"] >= 0 and p["busy_s"] >= 0 and p["idle_s"] >= 0


def test_dac_run_keeps_the_script_output_before_the_json(fib_json):
    assert fib_json[0].startswith("fib(20) = 6765 in ")
    assert not fib_json[0].startswith("{")


def test_nqueens_example_prints_the_count():
    code, out, err = run_command([sys.executable, "examples/nqueens.py", "8",
                                  "--procs", "2"])
    assert code == 0, err
    assert out.splitlines()[0].startswith("8-queens: 92 solutions in ")


def test_dac_run_on_a_missing_script_exits_2():
    code, out, err = run_command([DAC, "run", "no/such/script.py"])
    assert code == 2
    assert "no such script: no/such/script.py" in err
    assert out == ""


def test_dac_run_json_without_a_dac_run_fails(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("print('hello')\n")
    code, out, err = run_command([DAC, "run", "--json", str(script)])
    assert code == 1
    assert out == "hello\n"
    assert "made no dac run" in err


def test_dac_without_a_command_is_a_usage_error():
    code, out, err = run_command([DAC])
    assert code == 2
    assert "usage: dac" in err
