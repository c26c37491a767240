"""A run's timeline as one self-contained HTML file (``dac run --timeline run.html``), or
a static image (``--timeline run.png``, drawn with matplotlib, the ``plot`` extra).

The processes' recordings (``stealing.observe.recorder``) come with their statistics; this
module lays them out: one lane per process, grouped by cluster and ordered by their
place in the tree (a router above its leaves), with its busy, idle and starting spans,
its steals as marks (``local``, ``split``, ``remote``, ``failed``: what came back,
how many tasks, the round trip), and the run's totals. The data sit in the page as
JSON (``<script type="application/json" id="dac-timeline">``) and a few lines of
JavaScript draw them as SVG: no server, no network, nothing to install to open it.
"""

from __future__ import annotations

import html
import json

from .errors import DacError

KINDS = ("busy", "idle", "starting")
MARKS = ("local", "split", "remote", "failed", "remote-failed")
# the steal counts the page shows, named and ordered as ``stealing.observe.stats.format_stats``
STEAL_KEYS = ("steals_local", "steals_remote", "steals_split", "steals_failed")


def build(processes: list, started: float, ended: float, title: str = "") -> dict:
    """The timeline's data from the run's per-process records (their ``timeline``
    entries are taken out of them)."""
    lanes = []
    for p in processes:
        rec = p.pop("timeline", None) or {"spans": [], "marks": []}
        spans = [s for s in rec["spans"] if s[1] > s[0]]
        ready = p.get("started_at")
        steps = p.get("startup") or {}
        if ready and steps.get("ready_s") is not None and \
                ready - steps["ready_s"] >= started - 1.0:
            spans.insert(0, [round(ready - steps["ready_s"], 6), ready, "starting"])
        lanes.append({"role": p["role"], "cluster": p.get("cluster", "local"),
                      "host": p.get("host", ""), "pid": p.get("pid", 0),
                      "path": p.get("path", []), "tasks": p.get("tasks", 0),
                      "busy_s": p.get("busy_s", 0.0), "idle_s": p.get("idle_s", 0.0),
                      "lost": bool(p.get("lost")), "left": bool(p.get("left")),
                      "spans": spans, "marks": rec["marks"]})
    lanes.sort(key=lambda lane: (lane["role"] != "root", lane["cluster"],
                                 lane["path"]))
    totals = {"busy_s": round(sum(lane["busy_s"] for lane in lanes), 6),
              "idle_s": round(sum(lane["idle_s"] for lane in lanes), 6),
              "tasks": sum(lane["tasks"] for lane in lanes),
              # the statistics' own counts (stealing.observe.stats), not the marks: a mark is
              # a batch or refusal a process received, a steal is counted where it
              # was answered or sent up
              "steals": {k: sum(p.get(k, 0) for p in processes) for k in STEAL_KEYS},
              "marks": {k: sum(1 for lane in lanes for m in lane["marks"] if m[1] == k)
                        for k in MARKS},
              # what crossed a cluster link (counted by the parents: stealing.observe.stats)
              "wide": {k: sum(p.get(k, 0) for p in processes)
                       for k in ("steals_wide", "tasks_wide", "results_wide",
                                 "bytes_wide")}}
    return {"title": title, "started": started, "ended": ended,
            "elapsed_s": round(ended - started, 6), "lanes": lanes, "totals": totals}


def write_html(path: str, data: dict) -> None:
    """Write ``data`` (``build``'s) and the page that draws it to ``path``."""
    blob = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    page = PAGE.replace("%TITLE%", html.escape(data.get("title") or "dac run"))
    page = page.replace("%DATA%", blob)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)


COLORS = {"busy": "#2e9e4f", "idle": "#d9d9d9", "starting": "#8fb3e0",
          "local": "#1f5fbf", "split": "#e08a00", "remote": "#8a3fbf",
          "failed": "#cc2222", "remote-failed": "#cc2222"}


def write_png(path: str, data: dict) -> None:
    """The same lanes as a static image, drawn with matplotlib (the ``plot`` extra:
    a well-kept plotting library that writes PNG without a display; imported only
    here)."""
    try:
        import matplotlib  # lazy: ~0.3 s, the plot extra; only a .png timeline needs it
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # lazy: as matplotlib, after choosing Agg
        from matplotlib.patches import Patch  # lazy: as matplotlib
    except ImportError:
        raise DacError(f"a PNG timeline ({path}) needs matplotlib: pip install "
                       f"matplotlib, or ask for an .html page") from None
    lanes, t0 = data["lanes"], data["started"]
    fig, ax = plt.subplots(figsize=(12, 1.6 + 0.28 * len(lanes)))
    for i, lane in enumerate(lanes):
        y = len(lanes) - 1 - i
        for kind in KINDS:
            bars = [(s - t0, e - s) for s, e, k in lane["spans"] if k == kind]
            if bars:
                ax.broken_barh(bars, (y - 0.35, 0.7), facecolors=COLORS[kind])
        if lane["marks"]:
            ax.scatter([m[0] - t0 for m in lane["marks"]], [y + 0.42] * len(lane["marks"]),
                       marker="v", s=14, c=[COLORS.get(m[1], "#000") for m in lane["marks"]],
                       zorder=3)
    names = [f"{l['role']} {l['pid']}" + (f" [{'.'.join(map(str, l['path']))}]"
                                          if l["path"] else "") +
             (f" {l['cluster']}" if l["role"] != "root" else "") for l in lanes]
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(list(reversed(names)), fontsize=8)
    last = max([e for l in lanes for _, e, _ in l["spans"]] + [data["ended"]])
    first = min([s for l in lanes for s, _, _ in l["spans"]] + [t0])
    ax.set_xlim(first - t0, last - t0)
    ax.set_xlabel("seconds since the run started")
    tt = data["totals"]
    ax.set_title(f"dac timeline: {data.get('title') or 'run'}: {data['elapsed_s']:.3f} s, "
                 f"{tt['tasks']} tasks, {tt['busy_s']:.2f} s busy", fontsize=10)
    ax.legend(handles=[Patch(color=COLORS[k], label=k) for k in
                       ("busy", "idle", "starting", "local", "split", "remote", "failed")],
              loc="upper center", bbox_to_anchor=(0.5, -0.12 - 2.0 / (len(lanes) + 6)),
              ncol=7, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(path: str, data: dict) -> None:
    """The page (``.html``) or the image (``.png``) ``path`` asks for."""
    (write_png if path.endswith(".png") else write_html)(path, data)


def read_html(path: str) -> dict:
    """The data embedded in a timeline page (for tests and tools)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.index('<script type="application/json" id="dac-timeline">')
    start = text.index(">", start) + 1
    end = text.index("</script>", start)
    return json.loads(text[start:end].replace("<\\/", "</"))


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dac timeline: %TITLE%</title>
<style>
body{font:13px system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:16px;margin:0 0 6px}
#totals{margin:0 0 10px;color:#444}
.key span{display:inline-block;margin-right:14px}
.key i{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle}
svg text{font:11px system-ui,sans-serif;fill:#333}
</style></head><body>
<h1>dac timeline: %TITLE%</h1>
<div id="totals"></div>
<div class="key">
<span><i style="background:#2e9e4f"></i>busy</span>
<span><i style="background:#d9d9d9"></i>idle</span>
<span><i style="background:#8fb3e0"></i>starting</span>
<span>marks:</span>
<span><i style="background:#1f5fbf"></i>tasks from the pool</span>
<span><i style="background:#e08a00"></i>work split off a leaf</span>
<span><i style="background:#8a3fbf"></i>a router asked its parent</span>
<span><i style="background:#cc2222"></i>no more</span>
</div>
<svg id="lanes" xmlns="http://www.w3.org/2000/svg"></svg>
<script type="application/json" id="dac-timeline">%DATA%</script>
<script>
(function () {
  var d = JSON.parse(document.getElementById("dac-timeline").textContent);
  var NS = "http://www.w3.org/2000/svg", svg = document.getElementById("lanes");
  var left = 260, width = Math.max(600, window.innerWidth - left - 60), h = 16;
  var t0 = d.started, span = Math.max(d.ended - d.started, 1e-6);
  d.lanes.forEach(function (l) { l.spans.forEach(function (s) {
    if (s[0] < t0) { span += t0 - s[0]; t0 = s[0]; } }); });
  var x = function (t) { return left + (t - t0) / span * width; };
  var fill = {busy: "#2e9e4f", idle: "#d9d9d9", starting: "#8fb3e0", local: "#1f5fbf",
    split: "#e08a00", remote: "#8a3fbf", failed: "#cc2222", "remote-failed": "#cc2222"};
  function el(name, attrs, parent, text) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    (parent || svg).appendChild(e); return e;
  }
  var y = 24, cluster = null;
  for (var s = 0; s <= 10; s++) {
    var t = t0 + span * s / 10;
    el("line", {x1: x(t), x2: x(t), y1: 18, y2: 22, stroke: "#999"});
    el("text", {x: x(t) - 10, y: 14}, null, ((t - d.started)).toFixed(2) + " s");
  }
  d.lanes.forEach(function (l) {
    if (l.cluster !== cluster && l.role !== "root") {
      cluster = l.cluster; y += 6;
      el("text", {x: 4, y: y + 10, "font-weight": "bold"}, null, "cluster " + cluster);
      y += h;
    }
    var g = el("g", {"class": "lane", "data-pid": l.pid, "data-role": l.role});
    var depth = l.path.length, name = l.role + " " + l.pid +
      (l.path.length ? " [" + l.path.join(".") + "]" : "") + (l.lost ? " lost" : "") +
      (l.left ? " left" : "");
    el("text", {x: 4 + 8 * depth, y: y + 11}, g, name);
    el("rect", {x: left, y: y, width: width, height: h - 4, fill: "#f4f4f4"}, g);
    l.spans.forEach(function (s) {
      var r = el("rect", {x: x(s[0]), y: y, width: Math.max(0.5, x(s[1]) - x(s[0])),
        height: h - 4, fill: fill[s[2]] || "#777"}, g);
      el("title", {}, r, s[2] + " " + ((s[1] - s[0]) * 1000).toFixed(1) + " ms");
    });
    l.marks.forEach(function (m) {
      var c = x(m[0]), p = el("path", {d: "M" + (c - 3) + " " + (y - 1) + " L" +
        (c + 3) + " " + (y - 1) + " L" + c + " " + (y + 5) + " Z",
        fill: fill[m[1]] || "#000"}, g);
      el("title", {}, p, "received (" + m[1] + "): " + m[2] + " tasks, round trip " +
        (m[3] * 1000).toFixed(2) + " ms");
    });
    el("text", {x: left + width + 6, y: y + 11}, g,
       l.tasks + " tasks, " + l.busy_s.toFixed(2) + " s busy");
    y += h;
  });
  svg.setAttribute("width", left + width + 160); svg.setAttribute("height", y + 10);
  var tt = d.totals, st = tt.steals;
  document.getElementById("totals").textContent = d.elapsed_s.toFixed(3) +
    " s, " + d.lanes.length + " processes, " + tt.tasks + " tasks, " +
    tt.busy_s.toFixed(2) + " s busy, " + tt.idle_s.toFixed(2) + " s idle; steals: " +
    st.steals_local + " local, " + st.steals_remote + " remote, " + st.steals_split +
    " split, " + st.steals_failed + " failed" + (tt.wide.steals_wide ||
    tt.wide.tasks_wide ? "; across clusters: " + tt.wide.steals_wide + " steals, " +
    tt.wide.tasks_wide + " tasks, " + tt.wide.results_wide + " results, " +
    tt.wide.bytes_wide + " bytes" : "");
})();
</script></body></html>
"""
