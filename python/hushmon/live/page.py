"""The one page ``hushmon serve`` sends: inline CSS and JS, nothing fetched
from elsewhere (a login node has no network). It opens ``/events``
(server-sent events, one snapshot of state.py per second; ``/?max=N``
stops after N), reads ``/history``
once (the periods before it opened), keeps the last :data:`HISTORY` periods
per job in the browser and draws each key sensor
and application metric on a canvas: the average over nodes as a line, the
min-max over nodes as a band.

Job ids, sensor and metric names come from the wire: they are keys of
``Map``s (or of objects without a prototype), never of plain objects, so
a job called ``constructor`` or ``__proto__`` is a job like any other; they
reach the page as text (``textContent``, ``setAttribute``), never as HTML."""

from __future__ import annotations

from hushmon.display import without_credentials
from hushmon.live.state import HISTORY

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hushmon live</title>
<style>
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 1em 2em;
       color: #1d2430; }
h1 { font-size: 1.4em; border-bottom: 2px solid #2d6cdf; padding-bottom: .2em; }
h2 { font-size: 1.15em; color: #1f4f9e; margin-top: 1.4em; }
table { border-collapse: collapse; margin: .6em 0; font-size: .88em; }
th, td { border: 1px solid #ccd3de; padding: .2em .5em; text-align: right; }
th { background: #eef2f8; }
td.text, th.text { text-align: left; }
.meta { color: #556; font-size: .9em; }
.plots { display: flex; flex-wrap: wrap; gap: .6em; }
.plot { border: 1px solid #ccd3de; padding: .2em; }
.plot .t { font-size: .8em; color: #334; }
.down { color: #c62828; font-weight: 600; }
</style></head>
<body>
<h1>hushmon live</h1>
<p class="meta"><a href="/jobs">job history</a> (search, reports, compare) ·
summaries from <code id="url">__URL__</code>; <span id="status">connecting</span>;
periods from before: <span id="history">0</span>; updates received: <span id="updates">0</span>;
messages <span id="messages">0</span>
(bad <span id="bad">0</span>); <span id="clock"></span></p>
<table id="jobs"><thead></thead><tbody></tbody></table>
<div id="panels"></div>
<script>
"use strict";
const HISTORY = __HISTORY__;
// job -> {t: [], series: Map name -> [[min, avg, max], ...], units: Map name -> unit}
const hist = new Map();
let updates = 0;
function num(x, unit) {
  if (x === null || x === undefined) return "-";
  if (unit === "B/s") {
    for (const [p, s] of [["G", 1e9], ["M", 1e6], ["k", 1e3]])
      if (Math.abs(x) >= s) return (x / s).toPrecision(3) + p;
  }
  return Number(x).toPrecision(3);
}
function cellText(s) {
  if (!s) return "-";
  const avg = num(s.avg, s.unit);
  if (s.count <= 1 || s.min === s.max) return avg;
  return avg + " (" + num(s.min, s.unit) + "-" + num(s.max, s.unit) + ")";
}
function hhmmss(ns) { return new Date(ns / 1e6).toISOString().substr(11, 8); }
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
// entry: {time_ns, series: {name: [min, avg, max]}, units: {name: unit}}
// (what /history sends, and what record() makes of a snapshot's job);
// only its own keys are read (Object.keys), as JSON.parse makes them
function recordEntry(jobId, entry) {
  let h = hist.get(jobId);
  if (!h) hist.set(jobId, h = {t: [], series: new Map(), units: new Map()});
  const last = h.t.length ? h.t[h.t.length - 1] : -Infinity;
  if (entry.time_ns < last) return;
  if (entry.time_ns === last) {  // the same period, merged further meanwhile
    for (const ser of h.series.values()) ser.pop();
    h.t.pop();
  }
  h.t.push(entry.time_ns);
  for (const name of Object.keys(entry.series)) {
    let ser = h.series.get(name);
    if (!ser) h.series.set(name, ser = []);
    while (ser.length < h.t.length - 1) ser.push(null);
    ser.push(entry.series[name]);
    h.units.set(name, entry.units[name]);
  }
  for (const ser of h.series.values()) {
    while (ser.length < h.t.length) ser.push(null);
    if (ser.length > HISTORY) ser.splice(0, ser.length - HISTORY);
  }
  if (h.t.length > HISTORY) h.t.splice(0, h.t.length - HISTORY);
}
function record(job) {
  const entry = {time_ns: job.time_ns, series: Object.create(null), units: Object.create(null)};
  for (const s of job.sensors) {
    entry.series[s.label] = [s.min, s.avg, s.max];
    entry.units[s.label] = s.unit;
  }
  // app values of an older period (this one has none) are not plotted again at this time
  for (const a of job.app_time_ns === job.time_ns ? job.app : []) {
    entry.series["app " + a.name] = [a.min, a.avg, a.max];
    entry.units["app " + a.name] = a.unit;
  }
  recordEntry(job.job, entry);
}
function pathTo(ctx, i, px, py) { if (i) ctx.lineTo(px, py); else ctx.moveTo(px, py); }
function draw(canvas, t, ser, unit) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height, L = 52, B = 16;
  ctx.clearRect(0, 0, W, H);
  const pts = ser.map((v, i) => v && v[1] !== null ? [t[i], v] : null).filter(Boolean);
  if (!pts.length) return;
  let lo = Infinity, hi = -Infinity;
  for (const [, v] of pts) { lo = Math.min(lo, v[0] ?? v[1]); hi = Math.max(hi, v[2] ?? v[1]); }
  if (hi === lo) { hi += Math.abs(hi) * 0.05 + 1e-9; lo -= Math.abs(lo) * 0.05 + 1e-9; }
  const t0 = t[0], t1 = Math.max(t[t.length - 1], t0 + 1);
  const x = tt => L + (W - L - 4) * (tt - t0) / (t1 - t0);
  const y = v => 4 + (H - B - 8) * (1 - (v - lo) / (hi - lo));
  ctx.strokeStyle = "#ccd3de"; ctx.strokeRect(L, 4, W - L - 4, H - B - 8);
  ctx.fillStyle = "#445"; ctx.font = "10px sans-serif";
  ctx.fillText(num(hi, unit), 2, 12); ctx.fillText(num(lo, unit), 2, H - B - 2);
  ctx.fillText(hhmmss(t0), L, H - 3);
  ctx.fillText(hhmmss(t1), W - 50, H - 3);
  ctx.fillStyle = "rgba(45,108,223,0.18)";
  ctx.beginPath();
  pts.forEach(([tt, v], i) => pathTo(ctx, i, x(tt), y(v[2] ?? v[1])));
  for (let i = pts.length - 1; i >= 0; i--) {
    ctx.lineTo(x(pts[i][0]), y(pts[i][1][0] ?? pts[i][1][1]));
  }
  ctx.closePath(); ctx.fill();
  ctx.strokeStyle = "#2d6cdf"; ctx.lineWidth = 1.5; ctx.beginPath();
  pts.forEach(([tt, v], i) => pathTo(ctx, i, x(tt), y(v[1])));
  ctx.stroke();
  if (pts.length === 1) {
    ctx.fillStyle = "#2d6cdf";
    ctx.fillRect(x(pts[0][0]) - 2, y(pts[0][1][1]) - 2, 4, 4);
  }
}
function heading(label, unit) { return label + (unit ? " " + unit : ""); }
function render(snap) {
  document.getElementById("messages").textContent = snap.messages;
  document.getElementById("bad").textContent = snap.bad;
  document.getElementById("clock").textContent = hhmmss(snap.now_ns) + " UTC";
  const labels = snap.labels;
  const thead = document.querySelector("#jobs thead");
  const tbody = document.querySelector("#jobs tbody");
  thead.replaceChildren(); tbody.replaceChildren();
  const hr = el("tr");
  for (const h of ["job", "nodes", "period (UTC)", "age s"]) {
    hr.append(el("th", {class: "text"}, h));
  }
  labels.forEach((l, i) => hr.append(el("th", {}, heading(l, snap.units[i]))));
  thead.append(hr);
  for (const job of snap.jobs) {
    record(job);
    const tr = el("tr", {"data-job": job.job});
    tr.append(el("td", {class: "text"}, job.job), el("td", {}, job.nodes.length),
              el("td", {}, hhmmss(job.time_ns)), el("td", {}, job.age_s.toFixed(1)));
    const by = new Map(job.sensors.map(s => [s.label, s]));
    for (const l of labels) tr.append(el("td", {"data-sensor": l}, cellText(by.get(l))));
    tbody.append(tr);
  }
  const panels = document.getElementById("panels");
  panels.replaceChildren();
  if (!snap.jobs.length) panels.append(el("p", {class: "meta"}, "no summaries yet"));
  for (const job of snap.jobs) {
    const h = hist.get(job.job);
    panels.append(el("h2", {}, "job " + job.job + ": " + job.nodes.length + " node(s) " +
      job.nodes.join(" ") + ", " + h.t.length + " period(s) shown"));
    const plots = el("div", {class: "plots"});
    for (const [name, ser] of h.series) {
      const box = el("div", {class: "plot"});
      const unit = h.units.get(name);
      box.append(el("div", {class: "t"}, name + (unit ? " [" + unit + "]" : "") +
        ": avg over nodes (line), min-max (band)"));
      const c = el("canvas", {width: 340, height: 120, "data-series": name});
      box.append(el("br"), c);
      plots.append(box);
      draw(c, h.t, ser, unit);
    }
    panels.append(plots);
    if (job.racks.length) {
      const t = el("table", {class: "racks"});
      const r0 = el("tr");
      for (const hd of ["rack", "nodes", "period (UTC)"]) r0.append(el("th", {class: "text"}, hd));
      labels.forEach((l, i) => r0.append(el("th", {}, heading(l, snap.units[i]))));
      t.append(r0);
      for (const rack of job.racks) {
        const r = el("tr", {"data-rack": rack.rack});
        r.append(el("td", {class: "text"}, rack.rack), el("td", {class: "text"},
          rack.nodes.join(" ")), el("td", {}, hhmmss(rack.time_ns)));
        const by = new Map(rack.sensors.map(s => [s.label, s]));
        for (const l of labels) r.append(el("td", {}, cellText(by.get(l))));
        t.append(r);
      }
      panels.append(t);
    }
    if (job.app.length) {
      const t = el("table", {class: "app"});
      const r0 = el("tr");
      for (const hd of ["application metric", "ranks", "min", "avg", "max"]) {
        r0.append(el("th", {}, hd));
      }
      t.append(r0);
      for (const a of job.app) {
        const r = el("tr");
        r.append(el("td", {class: "text"}, a.name), el("td", {}, a.ranks));
        for (const k of ["min", "avg", "max"]) r.append(el("td", {}, num(a[k], a.unit)));
        t.append(r);
      }
      panels.append(t);
    }
  }
}
function status(text, cls) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = cls;
}
function live() {
  // ?max=N: stop after N updates (a screenshot, a kiosk that reloads)
  const max = new URLSearchParams(location.search).get("max");
  const es = new EventSource("/events" + (max ? "?max=" + encodeURIComponent(max) : ""));
  es.addEventListener("end", () => {
    es.close();
    status("stopped after " + updates + " updates", "");
  });
  es.onopen = () => status("live", "");
  es.onerror = () => status("disconnected (retrying)", "down");
  es.onmessage = ev => {
    updates++;
    document.getElementById("updates").textContent = updates;
    render(JSON.parse(ev.data));
  };
}
// the periods before this page opened, then the live flow
fetch("/history").then(r => r.json()).then(h => {
  let n = 0;
  for (const [job, entries] of Object.entries(h)) {
    for (const entry of entries) { recordEntry(job, entry); n++; }
  }
  document.getElementById("history").textContent = n;
}).catch(() => {}).finally(live);
</script>
</body></html>
"""


def page(url: str) -> str:
    import html

    shown = html.escape(without_credentials(url))
    return PAGE.replace("__URL__", shown).replace("__HISTORY__", str(HISTORY))
