"""The ``dac`` command.

    dac run [--json] script.py [args...]   run a script as the root on this machine
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys

EXAMPLES = """examples:
  dac run examples/nqueens.py 12
  dac run --json examples/fib.py 30     # last stdout line: {"result":..., "stats":...}
"""


def _json_default(value):
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return repr(value)


def _cmd_run(args) -> int:
    import dac.runtime as rt
    script = args.script
    if not os.path.isfile(script):
        print(f"dac run: no such script: {script}", file=sys.stderr)
        return 2
    sys.argv = [script] + list(args.args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    rt.last_report = None
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if args.json:
        report = rt.last_report
        if report is None:
            print(f"dac run: {script} made no dac run, nothing to report as JSON",
                  file=sys.stderr)
            return code or 1
        sys.stdout.flush()
        print(json.dumps(report.to_json(), default=_json_default))
    return code


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="dac", description="Divide-and-conquer work "
                                 "stealing over spawned MPI processes.",
                                 epilog=EXAMPLES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a script as the root of a dac computation",
                         epilog=EXAMPLES,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--json", action="store_true",
                     help="end stdout with one JSON line: result, elapsed_s, stats")
    run.add_argument("script", help="Python script that calls dac.run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the script")
    run.set_defaults(func=_cmd_run)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
