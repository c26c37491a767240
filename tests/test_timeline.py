"""The timeline page (``dac run --timeline run.html``): its embedded data parse, every
process has a lane, the busy time in it is the statistics', steals are marked with
their kind, size and round trip, and the page needs nothing from outside."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from nested_programs import sleep_spine
from proctools import new_tag, tagged_env
from programs import QUEENS, queens

import dac
from dac.timeline_page import MARKS, read_html

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TWO = os.path.join(CHECKOUT, "examples", "topologies", "two-clusters.toml")


def busy(lane) -> float:
    return sum(e - s for s, e, k in lane["spans"] if k == "busy")


def test_two_clusters_have_a_lane_per_process_and_the_statistics_busy_time(tmp_path):
    page = tmp_path / "run.html"
    report = dac.run_report(queens, 10, 0, 0, 0, topology=TWO, local=True,
                            timeline=str(page), root_helps=False, depth=2)
    assert report.result == QUEENS[10]
    data = read_html(str(page))
    procs = report.stats["processes"]
    assert all("timeline" not in p for p in procs)      # it went to the page
    lanes = data["lanes"]
    assert sorted((l["role"], l["pid"]) for l in lanes) == \
        sorted((p["role"], p["pid"]) for p in procs)
    assert lanes[0]["role"] == "root"
    # grouped by cluster, a router above its leaves
    assert [(l["role"], l["cluster"]) for l in lanes[1:]] == \
        [("router", "far"), ("leaf", "far"), ("leaf", "far"),
         ("router", "near"), ("leaf", "near"), ("leaf", "near")]
    by_pid = {p["pid"]: p for p in procs}
    for lane in lanes:
        rec = by_pid[lane["pid"]]
        assert busy(lane) == pytest.approx(rec["busy_s"], rel=0.01, abs=1e-6)
        assert lane["tasks"] == rec["tasks"]
        for s, e, kind in lane["spans"]:
            assert kind in ("busy", "idle", "starting") and e >= s
            assert data["started"] - 5 <= s and e <= data["ended"] + 0.5
        for t, kind, n, rtt in lane["marks"]:
            assert kind in MARKS and n >= 0 and rtt >= 0
            assert data["started"] <= t <= data["ended"] + 0.5
    leaves = [l for l in lanes if l["role"] == "leaf"]
    assert all(any(k == "starting" for _, _, k in l["spans"]) for l in leaves)
    assert all(any(m[1] == "local" for m in l["marks"]) for l in leaves)
    routers = [l for l in lanes if l["role"] == "router"]
    assert all(any(m[1].startswith("remote") for m in r["marks"]) for r in routers)
    totals = data["totals"]
    assert totals["tasks"] == report.stats["tasks"]
    assert totals["wide"] == {k: report.stats[k] for k in (
        "steals_wide", "tasks_wide", "results_wide", "bytes_wide")}
    assert totals["wide"]["steals_wide"] >= 2
    assert totals["busy_s"] == pytest.approx(sum(p["busy_s"] for p in procs), rel=0.01)
    assert data["elapsed_s"] == pytest.approx(report.elapsed_s, abs=0.05)


def test_work_split_off_a_leaf_is_marked_split(tmp_path):
    page = tmp_path / "spine.html"
    with dac.Runtime(procs=2, timeline=str(page), root_helps=False) as rt:
        report = rt.run_report(sleep_spine, 40, 5.0)
    assert report.result == 40 and report.stats["split_tasks"] >= 1
    data = read_html(str(page))
    marks = [m for l in data["lanes"] for m in l["marks"]]
    split = [m for m in marks if m[1] == "split"]
    assert split and all(m[2] >= 1 for m in split)
    assert data["totals"]["marks"]["split"] == len(split)
    # the page's steal counts are the statistics' own
    assert data["totals"]["steals"] == {k: report.stats[k] for k in (
        "steals_local", "steals_remote", "steals_split", "steals_failed")}
    assert sum(m[2] for m in split) <= report.stats["split_given"]


def test_the_page_is_self_contained_and_timeline_can_change_between_runs(tmp_path):
    first, second = tmp_path / "a.html", tmp_path / "b.html"
    with dac.Runtime(procs=2, timeline=str(first)) as rt:
        rt.run(queens, 9, 0, 0, 0)
        rt.timeline = None
        plain = rt.run_report(queens, 9, 0, 0, 0)
        rt.timeline = str(second)
        rt.run(queens, 8, 0, 0, 0)
    assert all("timeline" not in p for p in plain.stats["processes"])
    assert read_html(str(second))["title"].startswith("queens(8")
    text = first.read_text()
    assert "<script src" not in text and "href=" not in text and "@import" not in text
    assert text.count('id="dac-timeline"') == 1


def test_timeline_option_is_checked():
    with pytest.raises(ValueError, match=r"timeline must be the path of an \.html page or a \.png"):
        dac.Runtime(procs=1, timeline="run.txt")


def test_dac_run_timeline_writes_the_page(tmp_path):
    page = tmp_path / "cli.html"
    script = tmp_path / "s.py"
    script.write_text(f"import sys\nsys.path.insert(0, {os.path.join(CHECKOUT, 'tests')!r})"
                      "\nimport dac\nfrom programs import queens\n"
                      "print(dac.run(queens, 9, 0, 0, 0, procs=2))\n")
    done = subprocess.run([sys.executable, "-m", "launcher.cli", "run", "--quiet",
                           "--timeline", str(page), str(script)], cwd=CHECKOUT,
                          env=tagged_env(new_tag()), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "352"
    data = read_html(str(page))
    assert sum(l["role"] == "leaf" for l in data["lanes"]) == 2


def test_a_png_image_of_the_same_lanes(tmp_path):
    pytest.importorskip("matplotlib", reason="the PNG needs pip install matplotlib")
    image = tmp_path / "run.png"
    report = dac.run_report(queens, 9, 0, 0, 0, procs=2, timeline=str(image))
    assert report.result == QUEENS[9]
    data = image.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    import struct
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 1000 and height >= 150


def test_a_png_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch):
    import builtins
    real = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    from dac.timeline_page import write
    with pytest.raises(dac.DacError, match=r"a PNG timeline \(x\.png\) needs matplotlib: "
                                           r"pip install matplotlib"):
        write("x.png", {"lanes": [], "started": 0.0, "ended": 1.0, "elapsed_s": 1.0,
                        "totals": {}})
