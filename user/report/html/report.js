// SPDX-License-Identifier: BSD-2-Clause
// ptbpf report --html: the TensorBoard profiler plugin's views (overview,
// operators, kernels, memory) and more, drawn from the report's JSON (the
// same object `ptbpf report --json` prints) with hand-written SVG.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("ptbpf-data").textContent);
  const SVGNS = "http://www.w3.org/2000/svg";
  const COLORS = ["#2f6fba", "#e6862e", "#4c9a2a", "#c23b3b", "#8e5fb8", "#8c564b", "#d45fa8",
                  "#7f7f7f", "#b5b82a", "#22a7b8", "#9ab8e0", "#f2b77d"];
  const BREAKDOWN = ["Kernel", "Memcpy", "Memset", "Runtime", "DataLoader", "CPU Exec", "Other"];
  const BRK_COLORS = ["#2f6fba", "#e6862e", "#b5b82a", "#c23b3b", "#8e5fb8", "#4c9a2a", "#9aa0a6"];
  const MAX_BARS = 200, MAX_STEP_ROWS = 100;

  // ---- helpers ----
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") e.textContent = v; else if (k === "cls") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  function tip(node, text) { node.append(svg("title", {}, text)); return node; }
  const ms = ns => (ns / 1e6).toFixed(3);
  const us = ns => (ns / 1e3).toFixed(2);
  const pct = (a, b) => b ? (100 * a / b).toFixed(1) + "%" : "-";
  const mib = b => (b / 1048576).toFixed(2);
  function human(ns) {
    if (ns >= 1e9) return (ns / 1e9).toFixed(2) + " s";
    if (ns >= 1e6) return (ns / 1e6).toFixed(2) + " ms";
    return (ns / 1e3).toFixed(1) + " us";
  }
  const sum = (a, f) => a.reduce((s, x) => s + f(x), 0);

  // ---- tables: each numeric cell keeps its exact value in data-v ----
  // cols: [{key, title, fmt(row) -> text, v(row) -> number|string, cls}]
  function table(id, cols, rows, opts) {
    opts = opts || {};
    const thead = el("tr", {});
    const tbody = el("tbody", {});
    const t = el("table", { id: id }, el("thead", {}, thead), tbody);
    cols.forEach((c, i) => {
      const th = el("th", { cls: c.cls || "", "data-key": c.key, text: c.title,
                            title: c.help || ("sort by " + c.title) });
      th.addEventListener("click", () => sortBy(i));
      thead.append(th);
    });
    function fill(list) {
      tbody.textContent = "";
      for (const r of list) {
        const tr = el("tr", {});
        for (const c of cols) {
          const td = el("td", { cls: c.cls || "", "data-key": c.key });
          const v = c.v ? c.v(r) : undefined;
          if (v !== undefined) td.setAttribute("data-v", v);
          td.textContent = c.fmt ? c.fmt(r) : (v === undefined ? "" : v);
          if (c.title_of) td.title = c.title_of(r);
          if (c.sign) { const s = c.v(r); if (s > 0) td.classList.add("pos"); if (s < 0) td.classList.add("neg"); }
          tr.append(td);
        }
        tbody.append(tr);
      }
      if (opts.footer) tbody.append(opts.footer());
    }
    let sorted = -1, desc = true;
    function sortBy(i) {
      desc = sorted === i ? !desc : true;
      sorted = i;
      const c = cols[i];
      const key = r => c.sortv ? c.sortv(r) : (c.v ? c.v(r) : "");
      const list = rows.slice().sort((a, b) => {
        const x = key(a), y = key(b);
        const d = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return desc ? -d : d;
      });
      thead.querySelectorAll("th").forEach((th, k) => {
        th.classList.toggle("sorted-desc", k === i && desc);
        th.classList.toggle("sorted-asc", k === i && !desc);
      });
      fill(list);
    }
    fill(rows);
    return el("div", { cls: "tablewrap" }, t);
  }

  // ---- charts ----
  function legend(names, colors) {
    return el("div", { cls: "legend" }, ...names.map((n, i) =>
      el("span", {}, el("span", { cls: "sw", style: "background:" + colors[i % colors.length] }), n)));
  }

  function pie(title, items, colors, id) {
    // items: [{name, value}]
    const W = 220, R = 95, C = 110;
    const total = sum(items, x => x.value);
    const s = svg("svg", { width: W, height: W, viewBox: `0 0 ${W} ${W}`, role: "img", id: id });
    let a = -Math.PI / 2;
    items.forEach((it, i) => {
      const frac = total ? it.value / total : 0;
      const color = colors[i % colors.length];
      const label = `${it.name}: ${it.label || human(it.value)} (${(100 * frac).toFixed(1)}%)`;
      let node;
      if (frac <= 0) return;
      if (frac >= 0.99999) {
        node = svg("circle", { cx: C, cy: C, r: R, fill: color });
      } else {
        const b = a + frac * 2 * Math.PI;
        const large = frac > 0.5 ? 1 : 0;
        const p = `M${C},${C} L${C + R * Math.cos(a)},${C + R * Math.sin(a)} ` +
                  `A${R},${R} 0 ${large} 1 ${C + R * Math.cos(b)},${C + R * Math.sin(b)} Z`;
        node = svg("path", { d: p, fill: color, stroke: "#fff", "stroke-width": 1 });
        a = b;
      }
      node.setAttribute("data-name", it.name);
      node.setAttribute("data-v", it.value);
      s.append(tip(node, label));
    });
    if (!total) s.append(svg("text", { x: C, y: C, "text-anchor": "middle" }, "nothing to show"));
    return el("div", { cls: "chart" }, el("h3", { text: title }), s,
              legend(items.map(x => x.name), colors));
  }

  function topN(items, n, other) {
    items = items.slice().sort((a, b) => b.value - a.value);
    const top = items.slice(0, n);
    const rest = sum(items.slice(n), x => x.value);
    if (rest > 0) top.push({ name: other || "(other)", value: rest });
    return top;
  }

  // Stacked bars, one per step (or per group of steps past MAX_BARS).
  function stepBars(steps) {
    const groups = [];
    const per = Math.ceil(steps.length / MAX_BARS) || 1;
    for (let i = 0; i < steps.length; i += per) {
      const g = steps.slice(i, i + per);
      const brk = BREAKDOWN.map(k => sum(g, s => s.breakdown_ns[k]) / g.length);
      groups.push({ name: g.length > 1 ? `${g[0].name} .. ${g[g.length - 1].name} (mean)` : g[0].name, brk });
    }
    const H = 240, PAD = 48, W = Math.max(360, Math.min(1100, groups.length * 14 + PAD + 10));
    const bw = (W - PAD - 10) / Math.max(groups.length, 1);
    const maxv = Math.max(1, ...groups.map(g => sum(g.brk, x => x)));
    const s = svg("svg", { width: W, height: H + 30, id: "step-bars", role: "img" });
    const y = v => H - (v / maxv) * (H - 10);
    const axis = svg("g", { cls: "axis" });
    for (let k = 0; k <= 4; k++) {
      const v = maxv * k / 4, yy = y(v);
      s.append(svg("g", { class: "grid" }, svg("line", { x1: PAD, x2: W - 5, y1: yy, y2: yy })));
      axis.append(svg("text", { x: PAD - 4, y: yy + 4, "text-anchor": "end" }, ms(v)));
    }
    axis.append(svg("text", { x: PAD - 4, y: H + 20, "text-anchor": "end" }, "ms"));
    s.append(axis);
    groups.forEach((g, i) => {
      let acc = 0;
      const x = PAD + i * bw;
      g.brk.forEach((v, k) => {
        if (v <= 0) return;
        const r = svg("rect", { x: x + 1, width: Math.max(1, bw - 2), y: y(acc + v), height: y(acc) - y(acc + v),
                                fill: BRK_COLORS[k], "data-step": g.name, "data-kind": BREAKDOWN[k], "data-v": Math.round(v) });
        s.append(tip(r, `${g.name}\n${BREAKDOWN[k]}: ${ms(v)} ms`));
        acc += v;
      });
    });
    s.append(svg("text", { x: PAD + 2, y: H + 20 }, groups.length ? groups[0].name : ""));
    if (groups.length > 1)
      s.append(svg("text", { x: W - 5, y: H + 20, "text-anchor": "end" }, groups[groups.length - 1].name));
    return el("div", { cls: "chart" }, el("h3", { text: "Step time breakdown (ms per step; each instant counted once, in the legend's order)" }),
              s, legend(BREAKDOWN, BRK_COLORS));
  }

  function lineChart(id, title, series, t0) {
    // series: [{name, points: [[ts_ns, value], ...]}]; x in seconds from t0, y in MiB
    const W = 900, H = 260, PL = 60, PB = 30;
    const all = series.flatMap(s => s.points);
    const s = svg("svg", { width: W, height: H + PB, id: id, role: "img" });
    if (!all.length) return el("div", { cls: "chart" }, el("h3", { text: title }), s);
    const xs = all.map(p => p[0]), ys = all.map(p => p[1]);
    const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1), y1 = Math.max(...ys, 1);
    const X = v => PL + (v - x0) / (x1 - x0) * (W - PL - 10);
    const Y = v => H - v / y1 * (H - 10);
    for (let k = 0; k <= 4; k++) {
      const v = y1 * k / 4;
      s.append(svg("g", { class: "grid" }, svg("line", { x1: PL, x2: W - 5, y1: Y(v), y2: Y(v) })));
      s.append(svg("text", { x: PL - 4, y: Y(v) + 4, "text-anchor": "end" }, mib(v)));
      const tv = x0 + (x1 - x0) * k / 4;
      s.append(svg("text", { x: X(tv), y: H + 18, "text-anchor": "middle" }, ((tv - t0) / 1e9).toFixed(3) + " s"));
    }
    s.append(svg("text", { x: 4, y: H + 18 }, "MiB"));
    series.forEach((se, i) => {
      const pts = se.points.map(p => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(" ");
      s.append(tip(svg("polyline", { points: pts, fill: "none", stroke: COLORS[i % COLORS.length],
                                     "stroke-width": 1.5, "data-name": se.name }), se.name));
    });
    return el("div", { cls: "chart" }, el("h3", { text: title }), s,
              legend(series.map(x => x.name), COLORS));
  }

  function card(value, key) {
    return el("div", { cls: "card" }, el("div", { cls: "v", text: value }), el("div", { cls: "k", text: key }));
  }

  // ---- views ----
  const views = [];
  function view(id, title, build) { views.push({ id, title, build }); }

  function stepMean(steps) {
    const m = { name: "mean of all" };
    for (const k of ["dur_ns", "kernel_ns", "gpu_busy_ns", "memcpy_ns", "memset_ns", "cuda_api_ns", "dataloader_ns", "host_ops_ns"])
      m[k] = steps.length ? sum(steps, s => s[k]) / steps.length : 0;
    m.breakdown_ns = {};
    for (const k of BREAKDOWN) m.breakdown_ns[k] = steps.length ? sum(steps, s => s.breakdown_ns[k]) / steps.length : 0;
    return m;
  }

  // Other by cause, and the GPU's idle gaps (the kernel view's split)
  function causeTables(sec) {
    const cols = total => [
      { key: "cause", title: "cause", v: r => r.cause },
      { key: "ns", title: "ms", v: r => r.ns, fmt: r => ms(r.ns) },
      { key: "share", title: "share", v: r => r.ns / total, fmt: r => pct(r.ns, total) },
      { key: "advice", title: "what it means", v: r => r.advice || "" },
    ];
    const oc = D.other_causes;
    if (oc && oc.other_ns) {
      sec.append(el("h2", { text: "Other (" + pct(oc.other_ns, oc.steps_ns) + " of step time), by what each step's thread was doing" }));
      if (!oc.kernel_view)
        sec.append(el("p", { cls: "note", text: "The trace has no kernel view (traced with --no-sched or --raw): Other is not split." }));
      else
        sec.append(table("other-causes-table", cols(oc.steps_ns), oc.causes.concat(
          [{ cause: "unexplained", ns: oc.unexplained_ns, advice: "no record of the thread then" }])));
    }
    const gi = D.gpu_idle;
    if (gi && gi.gaps) {
      sec.append(el("h2", { text: "GPU idle gaps: " + gi.gaps + " of " + gi.min_gap_ns / 1000 + " us or more in steps, " + human(gi.idle_ns) }));
      const list = Object.entries(gi.covered_ns).filter(e => e[1]).map(e => ({ cause: e[0], ns: e[1] }))
        .concat(gi.launching_thread.map(c => ({ cause: "launching thread: " + c.cause, ns: c.ns })))
        .concat([{ cause: "unexplained", ns: gi.unexplained_ns }]);
      sec.append(table("gpu-idle-table", cols(gi.idle_ns), list));
    }
  }

  function overview(sec) {
    const steps = D.steps || [];
    const mean = stepMean(steps);
    const kernelTotal = sum(D.kernels || [], k => k.total_ns);
    sec.append(el("div", { cls: "cards" },
      card(String(steps.length), "steps (ProfilerStep#N)"),
      card(steps.length ? human(mean.dur_ns) : "-", "mean step time"),
      card(steps.length ? pct(sum(steps, s => s.gpu_busy_ns), sum(steps, s => s.dur_ns)) : "-", "GPU busy (of step time)"),
      card(human(kernelTotal), "kernel time, all kernels"),
      card(String((D.kernels || []).length), "distinct kernels"),
      card(String(D.track_events), "track events in the trace")));
    if (steps.length) {
      sec.append(el("h2", { text: "Step time breakdown" }));
      sec.append(el("div", { cls: "row" }, stepBars(steps),
        pie("Mean step", BREAKDOWN.map(k => ({ name: k, value: mean.breakdown_ns[k] })), BRK_COLORS, "breakdown-pie")));
    } else {
      sec.append(el("p", { cls: "note", text: "No ProfilerStep#N in this trace: steps come from the ends of consecutive Optimizer.step calls (record_function regions)." }));
    }
    if ((D.recommendations || []).length) {
      sec.append(el("h2", { text: "Recommendations" }));
      sec.append(el("ul", { cls: "advice", id: "recommendations" }, ...D.recommendations.map(r => el("li", { text: r }))));
    }
    causeTables(sec);
    if (!steps.length) return;
    sec.append(el("h2", { text: "Steps" + (steps.length > MAX_STEP_ROWS ? ` (the first ${MAX_STEP_ROWS} of ${steps.length}; the mean is of all)` : "") }));
    const cols = [
      { key: "name", title: "step", cls: "step", v: r => r.name, sortv: r => r.start_ns || 0 },
      { key: "dur_ns", title: "length ms", v: r => r.dur_ns, fmt: r => ms(r.dur_ns) },
      { key: "kernel_ns", title: "kernels ms", v: r => r.kernel_ns, fmt: r => ms(r.kernel_ns) },
      { key: "gpu_busy_ns", title: "GPU busy", v: r => r.gpu_busy_ns, fmt: r => pct(r.gpu_busy_ns, r.dur_ns) },
      { key: "memcpy_ns", title: "memcpy ms", v: r => r.memcpy_ns, fmt: r => ms(r.memcpy_ns) },
      { key: "memset_ns", title: "memset ms", v: r => r.memset_ns, fmt: r => ms(r.memset_ns) },
      { key: "cuda_api_ns", title: "CUDA API ms", v: r => r.cuda_api_ns, fmt: r => ms(r.cuda_api_ns) },
      { key: "dataloader_ns", title: "DataLoader ms", v: r => r.dataloader_ns, fmt: r => ms(r.dataloader_ns) },
      { key: "host_ops_ns", title: "host ops ms", v: r => r.host_ops_ns, fmt: r => ms(r.host_ops_ns) },
    ].concat(BREAKDOWN.map(k => ({ key: "brk:" + k, title: k + " ms", v: r => r.breakdown_ns[k], fmt: r => ms(r.breakdown_ns[k]) })));
    sec.append(table("steps-table", cols, steps.slice(0, MAX_STEP_ROWS), {
      footer: () => {
        const tr = el("tr", { cls: "mean" });
        for (const c of cols) tr.append(el("td", { cls: c.cls || "", text: c.key === "name" ? "mean of all" : c.fmt(mean) }));
        return tr;
      } }));
  }

  function operators(sec) {
    const byShape = D.operators_by_shape && D.operators_by_shape.some(o => o.input_shapes !== undefined);
    const controls = el("div", { cls: "controls" });
    const body = el("div", {});
    let mode = "op", n = 10;
    const groupSel = el("select", { id: "op-group", onchange: e => { mode = e.target.value; draw(); } },
      el("option", { value: "op", text: "operator" }), byShape ? el("option", { value: "shape", text: "operator and input shapes" }) : null);
    const nSel = el("select", { id: "op-top", onchange: e => { n = +e.target.value; draw(); } },
      ...[5, 10, 20].map(k => el("option", Object.assign({ value: k, text: "top " + k }, k === 10 ? { selected: "" } : {}))));
    controls.append(el("label", { text: "group by " }, groupSel), el("label", { text: "pies: " }, nSel));
    sec.append(controls, body);
    function draw() {
      const rows = mode === "shape" ? D.operators_by_shape : D.operators;
      const label = o => o.name + (mode === "shape" && o.input_shapes !== undefined ? " " + o.input_shapes : "");
      body.textContent = "";
      body.append(el("div", { cls: "row" },
        pie(`Host self time, top ${n}`, topN(rows.map(o => ({ name: label(o), value: o.host_self_ns })), n), COLORS, "op-host-pie"),
        pie(`Device self time, top ${n}`, topN(rows.map(o => ({ name: label(o), value: o.device_self_ns })), n), COLORS, "op-device-pie"),
        pie(`Host total time, top ${n}`, topN(rows.map(o => ({ name: label(o), value: o.host_total_ns })), n), COLORS, "op-host-total-pie")));
      const cols = [
        { key: "name", title: "operator", cls: "name", v: r => r.name },
        mode === "shape" ? { key: "input_shapes", title: "input shapes", cls: "shape", v: r => r.input_shapes === undefined ? "" : r.input_shapes } : null,
        { key: "calls", title: "calls", v: r => r.calls },
        { key: "host_total_ns", title: "host total ms", v: r => r.host_total_ns, fmt: r => ms(r.host_total_ns), help: "time in the op, its children included" },
        { key: "host_self_ns", title: "host self ms", v: r => r.host_self_ns, fmt: r => ms(r.host_self_ns), help: "time in the op, less its children" },
        { key: "device_total_ns", title: "device total ms", v: r => r.device_total_ns, fmt: r => ms(r.device_total_ns), help: "GPU time of the kernels it or its children launched" },
        { key: "device_self_ns", title: "device self ms", v: r => r.device_self_ns, fmt: r => ms(r.device_self_ns), help: "GPU time of the kernels it launched itself" },
        { key: "alloc_bytes", title: "alloc MiB", v: r => r.alloc_bytes, fmt: r => mib(r.alloc_bytes) },
      ].filter(Boolean);
      body.append(el("h2", { text: mode === "shape" ? "Operators by input shapes" : "Operators" }),
                  table(mode === "shape" ? "operators-by-shape-table" : "operators-table", cols, rows));
    }
    draw();
  }

  function kernels(sec) {
    const ks = D.kernels || [];
    const total = sum(ks, k => k.total_ns);
    if (!ks.length) { sec.append(el("p", { cls: "note", text: "No GPU kernels in this trace." })); return; }
    sec.append(el("div", { cls: "row" },
      pie("Kernel time, top 10", topN(ks.map(k => ({ name: k.display_name, value: k.total_ns })), 10), COLORS, "kernel-pie")));
    sec.append(el("h2", { text: "Kernels" }),
      el("p", { cls: "note", text: "Names are shortened (namespaces, parameter lists and deep template arguments left out) so that no two rows read the same; hover a name for it in full." }));
    sec.append(table("kernels-table", [
      { key: "name", title: "kernel", cls: "name", v: r => r.name, fmt: r => r.display_name, title_of: r => r.name },
      { key: "calls", title: "calls", v: r => r.calls },
      { key: "total_ns", title: "total ms", v: r => r.total_ns, fmt: r => ms(r.total_ns) },
      { key: "mean_ns", title: "mean us", v: r => r.total_ns / r.calls, fmt: r => us(r.total_ns / r.calls) },
      { key: "min_ns", title: "min us", v: r => r.min_ns, fmt: r => us(r.min_ns) },
      { key: "max_ns", title: "max us", v: r => r.max_ns, fmt: r => us(r.max_ns) },
      { key: "share", title: "% of kernel time", v: r => r.total_ns / (total || 1), fmt: r => pct(r.total_ns, total) },
    ], ks));
    graphs(sec, D.cuda_graphs || [], "CUDA graphs", "cuda-graphs-table", "captured_ns", "captured",
      "Replayed kernels of each CUDA graph, by the op open when their node was captured (a capture ptbpf saw).");
    graphs(sec, D.compiled_graphs || [], "Compiled graphs", "compiled-graphs-table", "with_aten_ops_ns", "with ATen ops",
      "Triton kernels of each torch.compile graph, by the ATen ops they fuse (from Inductor's generated code).");
  }

  function graphs(sec, gs, title, id, named, namedTitle, note) {
    if (!gs.length) return;
    const part = g => (g.parts || []).reduce((a, p) => (!a || p.device_ns > a.device_ns ? p : a), null);
    sec.append(el("h2", { text: title }), el("p", { cls: "note", text: note }));
    const pids = new Set(gs.map(g => g.pid)).size > 1;
    sec.append(table(id, [
      ...(pids ? [{ key: "pid", title: "pid", v: r => r.pid }] : []),
      { key: "graph", title: "graph", cls: "name", v: r => String(r.graph) },
      { key: "kernels", title: "kernels", v: r => r.kernels },
      { key: "device_ns", title: "device ms", v: r => r.device_ns, fmt: r => ms(r.device_ns) },
      { key: named, title: namedTitle, v: r => r[named], fmt: r => pct(r[named], r.device_ns) },
      { key: "part", title: "largest part", cls: "name", v: r => (part(r) || {}).name || "-",
        fmt: r => { const p = part(r); return p ? `${p.name} (${pct(p.device_ns, r.device_ns)})` : "-"; } },
    ], gs));
  }

  function memory(sec) {
    const mem = D.memory || [];
    if (!mem.length) {
      sec.append(el("p", { cls: "note", text: "No memory counters in this trace (trace with --memory)." }));
    } else {
      sec.append(lineChart("memory-curve", "Memory over time (MiB)", mem.map(m => ({ name: `pid ${m.pid} ${m.counter}`, points: m.curve || [] })), D.first_ts_ns || 0));
      sec.append(el("h2", { text: "Peaks" }), table("memory-table", [
        { key: "pid", title: "pid", v: r => r.pid },
        { key: "counter", title: "counter", cls: "name", v: r => r.counter },
        { key: "peak_bytes", title: "peak MiB", v: r => r.peak_bytes, fmt: r => mib(r.peak_bytes) },
        { key: "peak_ts_ns", title: "at (s)", v: r => r.peak_ts_ns, fmt: r => ((r.peak_ts_ns - (D.first_ts_ns || 0)) / 1e9).toFixed(6) },
      ], mem));
    }
    const alloc = (D.operators || []).filter(o => o.alloc_bytes > 0).sort((a, b) => b.alloc_bytes - a.alloc_bytes);
    if (alloc.length)
      sec.append(el("h2", { text: "Operators by bytes allocated in them" }), table("alloc-table", [
        { key: "name", title: "operator", cls: "name", v: r => r.name },
        { key: "alloc_bytes", title: "MiB", v: r => r.alloc_bytes, fmt: r => mib(r.alloc_bytes) },
        { key: "calls", title: "calls", v: r => r.calls },
      ], alloc));
  }

  // CPU samples per process: where its CPU time went, by innermost Python
  // frame and by native function (report_samples.c).
  function cpuSamples(sec) {
    const procs = D.cpu_samples || [];
    sec.append(el("h2", { text: "CPU samples" }));
    if (!procs.length) { sec.append(el("p", { cls: "note", text: "No CPU samples in this trace (traced with --no-samples, or no traced thread ran)." })); return; }
    const pct = r => (100 * r.share).toFixed(1) + "%";
    procs.forEach((p, i) => {
      sec.append(el("p", { cls: "note", text: "pid " + p.pid + " " + p.name + ": " + p.samples + " samples" + (D.cpu_sample_hz ? " (" + (p.samples / D.cpu_sample_hz).toFixed(1) + " s of CPU at " + D.cpu_sample_hz + " Hz)" : "") + ", " + p.with_python + " in Python code." }));
      sec.append(table("samples-python-" + i, [
        { key: "frame", title: "innermost Python frame", cls: "name", v: r => r.frame },
        { key: "samples", title: "samples", v: r => r.samples },
        { key: "share", title: "share", v: r => r.share, fmt: pct },
      ], p.python));
      sec.append(table("samples-native-" + i, [
        { key: "function", title: "native function (leaf)", cls: "name", v: r => r.function || "?" },
        { key: "file", title: "file", cls: "name", v: r => r.file },
        { key: "samples", title: "samples", v: r => r.samples },
        { key: "share", title: "share", v: r => r.share, fmt: pct },
      ], p.native));
    });
  }

  function python(sec) {
    const sites = D.python_sites || [];
    cpuSamples(sec);
    if (!sites.length) { sec.append(el("p", { cls: "note", text: "No Python stacks of ops in this trace (trace with --py-stacks)." })); return; }
    sec.append(el("p", { cls: "note", text: "The outermost ops, summed by the innermost Python frame outside torch's package (the user's line)." }));
    sec.append(el("div", { cls: "row" }, pie("Host time by call site, top 10", topN(sites.map(s => ({ name: s.site, value: s.host_total_ns })), 10), COLORS, "python-pie")));
    sec.append(table("python-table", [
      { key: "site", title: "call site", cls: "name", v: r => r.site },
      { key: "ops", title: "ops", v: r => r.ops },
      { key: "host_total_ns", title: "host total ms", v: r => r.host_total_ns, fmt: r => ms(r.host_total_ns) },
    ], sites));
  }

  function traceView(sec) {
    const st = D.trace_status || {};
    const attrs = D.trace_attributes || {};
    const keys = Object.keys(attrs);
    const lossKey = k => /lost|dropped|cut|unwound|not_seen|malformed/.test(k);
    const costKey = k => /cost|cpu|rss|memory|overhead/.test(k) && !lossKey(k);
    const row = (k, v) => el("tr", {}, el("td", { cls: "name", text: k }), el("td", { "data-v": v, text: String(v) }));
    sec.append(el("h2", { text: "The trace" }), el("table", { id: "trace-status" }, el("tbody", {},
      row("file", D.trace), row("complete (ends with ptbpf's end marker)", st.complete), row("cut", st.cut),
      row("damaged", st.damaged), row("packets", st.packets), row("bytes read", st.bytes),
      row("bytes not read", st.dropped_bytes), row("malformed packets", st.malformed_packets),
      row("track events", D.track_events),
      row("span (s)", ((D.last_ts_ns - D.first_ts_ns) / 1e9).toFixed(6)))));
    const group = (title, id, pred, empty) => {
      const ks = keys.filter(pred);
      sec.append(el("h2", { text: title }));
      if (!ks.length) { sec.append(el("p", { cls: "note", text: empty })); return; }
      sec.append(el("table", { id: id }, el("tbody", {}, ...ks.map(k => row(k, attrs[k])))));
    };
    group("What was lost", "trace-losses", lossKey, "The trace records no losses.");
    group("ptbpf's own cost", "trace-cost", costKey, "The trace does not record ptbpf's own cost (the loader prints it when it ends).");
    group("Other attributes", "trace-other", k => !lossKey(k) && !costKey(k), "none");
    if ((D.processes || []).length)
      sec.append(el("h2", { text: "Processes" }), table("processes-table", [
        { key: "pid", title: "pid", v: r => r.pid }, { key: "name", title: "name", cls: "name", v: r => r.name },
        { key: "rank", title: "rank", v: r => r.rank, fmt: r => r.rank < 0 ? "-" : r.rank },
        { key: "world_size", title: "world size", v: r => r.world_size, fmt: r => r.world_size < 0 ? "-" : r.world_size },
      ], D.processes));
    if ((D.devices || []).length)
      sec.append(el("h2", { text: "GPUs" }), el("table", { id: "devices-table" }, el("tbody", {},
        ...D.devices.map(d => el("tr", {}, el("td", { cls: "name", text: `pid ${d.pid} device ${d.id}` }),
          el("td", { cls: "name", text: Object.entries(d).filter(([k]) => k !== "pid" && k !== "id").map(([k, v]) => `${k}: ${v}`).join(", ") }))))));
    sec.append(el("h2", { text: "The timeline" }), el("p", { id: "perfetto" },
      "Open the trace itself in Perfetto: go to ", el("a", { href: "https://ui.perfetto.dev", rel: "noreferrer", text: "ui.perfetto.dev" }),
      ", choose ", el("b", { text: "Open trace file" }), " and pick ", el("code", { text: D.trace }),
      " (Perfetto reads it in the browser; nothing is uploaded). For Kineto tools (HTA, Chrome's about:tracing): ",
      el("code", { text: "ptbpf export --kineto OUT.json " + D.trace }), "."));
  }

  function diffView(sec) {
    const d = D.diff;
    sec.append(el("p", {}, "A: ", el("code", { text: d.a }), " \u2014 B: ", el("code", { text: d.b }),
      el("span", { cls: "note", text: " (differences are B \u2212 A; red: B took longer)" })));
    sec.append(el("div", { cls: "cards" },
      card(`${d.steps_a} / ${d.steps_b}`, "steps A / B"),
      card(`${human(d.mean_step_a_ns)} / ${human(d.mean_step_b_ns)}`, "mean step A / B"),
      card(`${human(d.kernel_total_a_ns)} / ${human(d.kernel_total_b_ns)}`, "kernel time A / B")));
    const opCols = [
      { key: "name", title: "operator", cls: "name", v: r => r.name },
      { key: "calls_a", title: "calls A", v: r => r.calls_a }, { key: "calls_b", title: "calls B", v: r => r.calls_b },
      { key: "host_total_a_ns", title: "host total A ms", v: r => r.host_total_a_ns, fmt: r => ms(r.host_total_a_ns) },
      { key: "host_total_b_ns", title: "host total B ms", v: r => r.host_total_b_ns, fmt: r => ms(r.host_total_b_ns) },
      { key: "host_total_diff_ns", title: "\u0394 host ms", v: r => r.host_total_b_ns - r.host_total_a_ns, fmt: r => ms(r.host_total_b_ns - r.host_total_a_ns), sign: true },
      { key: "device_total_a_ns", title: "device total A ms", v: r => r.device_total_a_ns, fmt: r => ms(r.device_total_a_ns) },
      { key: "device_total_b_ns", title: "device total B ms", v: r => r.device_total_b_ns, fmt: r => ms(r.device_total_b_ns) },
      { key: "device_total_diff_ns", title: "\u0394 device ms", v: r => r.device_total_b_ns - r.device_total_a_ns, fmt: r => ms(r.device_total_b_ns - r.device_total_a_ns), sign: true },
    ];
    const kCols = [
      { key: "name", title: "kernel", cls: "name", v: r => r.name, fmt: r => r.display_name, title_of: r => r.name },
      { key: "calls_a", title: "calls A", v: r => r.calls_a }, { key: "calls_b", title: "calls B", v: r => r.calls_b },
      { key: "total_a_ns", title: "total A ms", v: r => r.total_a_ns, fmt: r => ms(r.total_a_ns) },
      { key: "total_b_ns", title: "total B ms", v: r => r.total_b_ns, fmt: r => ms(r.total_b_ns) },
      { key: "total_diff_ns", title: "\u0394 ms", v: r => r.total_b_ns - r.total_a_ns, fmt: r => ms(r.total_b_ns - r.total_a_ns), sign: true },
    ];
    sec.append(diffBars("Largest host-time differences (operators)", d.operators.map(o => ({ name: o.name, value: o.host_total_b_ns - o.host_total_a_ns })), "diff-op-bars"));
    sec.append(el("h2", { text: "Operators" }), table("diff-operators-table", opCols, d.operators));
    sec.append(diffBars("Largest device-time differences (kernels)", d.kernels.map(k => ({ name: k.display_name, value: k.total_b_ns - k.total_a_ns })), "diff-kernel-bars"));
    sec.append(el("h2", { text: "Kernels" }), table("diff-kernels-table", kCols, d.kernels));
  }

  function diffBars(title, items, id) {
    items = items.filter(x => x.value !== 0).sort((a, b) => Math.abs(b.value) - Math.abs(a.value)).slice(0, 15);
    const W = 820, RH = 18, L = 360, H = items.length * RH + 10;
    const m = Math.max(1, ...items.map(x => Math.abs(x.value)));
    const mid = L + (W - L) / 2, half = (W - L) / 2 - 10;
    const s = svg("svg", { width: W, height: Math.max(H, 30), id: id, role: "img" });
    s.append(svg("line", { x1: mid, x2: mid, y1: 0, y2: H, stroke: "#8c959f" }));
    items.forEach((it, i) => {
      const w = Math.abs(it.value) / m * half, y = 5 + i * RH;
      s.append(svg("text", { x: L - 6, y: y + 12, "text-anchor": "end" }, it.name.length > 55 ? it.name.slice(0, 52) + "..." : it.name));
      s.append(tip(svg("rect", { x: it.value > 0 ? mid : mid - w, y: y + 2, width: Math.max(1, w), height: RH - 5,
                                 fill: it.value > 0 ? "#cf222e" : "#1a7f37", "data-name": it.name, "data-v": it.value }),
                   `${it.name}: ${it.value > 0 ? "+" : ""}${ms(it.value)} ms`));
    });
    if (!items.length) s.append(svg("text", { x: 10, y: 20 }, "no differences"));
    return el("div", { cls: "chart" }, el("h3", { text: title }), s);
  }

  // The daemon's hang capture (report_hang.c): who never entered the
  // collective the others wait in, and where it is.
  const who = r => r.rank !== "" ? "rank " + r.rank : "pid " + r.pid;
  function hangView(sec) {
    const h = D.hang, late = h.never_entered || [];
    sec.append(el("div", { cls: "cards" },
      ...late.slice(0, 4).map(r => card(who(r), "pid " + r.pid + (r.exited ? ": exited" : h.seq ? ": never entered it" : ": in its step"))),
      h.seq ? card(`${h.waiting} of ${h.processes}`, "wait in " + h.waited_in + " #" + h.seq) : card("none", "waits in a collective"),
      h.seq ? card(h.waiting_s.toFixed(1) + " s", "the oldest wait") : null));
    const lines = late.map(r => who(r) + " (pid " + r.pid + ") " +
      (h.seq ? "never entered " + h.waited_in + " #" + h.seq + " (it entered " + r.entered + " collectives)" : "is in its step") +
      (r.exited ? "; it exited " + r.exited_s_before.toFixed(1) + " s before the capture" : "") + ".");
    sec.append(el("ul", { cls: "advice", id: "hang-summary" }, ...lines.map(t => el("li", { text: t })),
      h.seq ? el("li", { text: `The others' common wait: ${h.waiting} of the job's ${h.processes} processes on this host wait in ${h.waited_in} #${h.seq}, the oldest for ${h.waiting_s.toFixed(1)} s.` })
            : el("li", { text: `None of the job's ${h.processes} processes on this host waits in a collective.` })));
    sec.append(el("p", { cls: "note", text: "The daemon wrote this capture when a rank's wait passed its limit (--hang). A frame is where the rank's main thread was in Python: blocked when tracing began, else its CPU samples' most frequent innermost frame." }));
    if (!late.length) return;
    sec.append(el("h2", { text: h.seq ? "Never entered " + h.waited_in + " #" + h.seq + ", or exited" : "Each process" }));
    sec.append(table("hang-table", [
      { key: "rank", title: "rank", v: r => r.rank, fmt: r => r.rank === "" ? "-" : r.rank },
      { key: "pid", title: "pid", v: r => r.pid },
      { key: "exited", title: "exited", v: r => String(r.exited), fmt: r => r.exited ? r.exited_s_before.toFixed(1) + " s before the capture" : "no" },
      { key: "entered", title: "collectives entered", v: r => r.entered },
      { key: "frame", title: "frame (its main thread's Python)", cls: "name", v: r => r.frame,
        fmt: r => r.exited ? "-" : (r.frame || "not known (no Python stack: CPython 3.10-3.13, and CPU samples)") },
      { key: "thread", title: "thread (kernel view)", cls: "name", v: r => r.thread, fmt: r => r.exited ? "-" : (r.thread || "not known") },
    ], late));
  }

  // Per step, the last rank to arrive in the collective the others waited
  // longest in, and why (report_ranks.c).
  function waitingView(sec) {
    const w = D.waiting_for, steps = w.steps;
    const causeOf = r => r.cause || (D.other_causes && D.other_causes.kernel_view ? "not explained" : "not known (no kernel view in the trace)");
    const groups = new Map();
    for (const r of steps) {
      const k = r.last + "\u0000" + causeOf(r);
      const g = groups.get(k) || { last: r.last, cause: causeOf(r), steps: 0, waited_ms: 0 };
      g.steps++;
      g.waited_ms += r.waited_ms;
      groups.set(k, g);
    }
    const sums = Array.from(groups.values()).sort((a, b) => b.steps - a.steps || b.waited_ms - a.waited_ms);
    const top = sums[0];
    sec.append(el("div", { cls: "cards" },
      card(top.last, "waited for most: " + pct(top.steps, steps.length) + " of steps"),
      card(top.cause, "its cause then"),
      card(String(steps.length), "steps"),
      card(String(w.collectives), `collectives of ${w.ranks} ranks matched`)));
    sec.append(el("h2", { text: "Whom the others waited for, and why" }));
    sec.append(el("p", { cls: "note", text: "Each collective matched across the ranks; per step, the one the others waited longest in. The cause is what the last rank's thread did between the second-last arrival and its own." }));
    sec.append(table("waiting-summary-table", [
      { key: "last", title: "last to arrive", cls: "step", v: r => r.last },
      { key: "cause", title: "its cause of lateness (kernel view)", cls: "name", v: r => r.cause },
      { key: "steps", title: "steps", v: r => r.steps },
      { key: "share", title: "share of steps", v: r => r.steps / steps.length, fmt: r => pct(r.steps, steps.length) },
      { key: "waited_ms", title: "the others waited ms", v: r => r.waited_ms, fmt: r => r.waited_ms.toFixed(2) },
    ], sums));
    sec.append(el("h2", { text: "Per step" + (steps.length > MAX_STEP_ROWS ? ` (the first ${MAX_STEP_ROWS} of ${steps.length})` : "") }));
    sec.append(table("waiting-table", [
      { key: "step", title: "step", cls: "step", v: r => r.step, fmt: r => r.step || "-" },
      { key: "collective", title: "collective", cls: "step", v: r => r.collective },
      { key: "last", title: "last", cls: "step", v: r => r.last },
      { key: "waited_ms", title: "waited ms", v: r => r.waited_ms, fmt: r => r.waited_ms.toFixed(2), help: "from the second-last arrival: every other rank waited at least that" },
      { key: "longest_ms", title: "longest ms", v: r => r.longest_ms, fmt: r => r.longest_ms.toFixed(2), help: "from the first arrival" },
      { key: "cause", title: "its cause of lateness (kernel view)", cls: "name", v: r => causeOf(r),
        fmt: r => causeOf(r) + (r.cause ? " " + (100 * r.cause_share).toFixed(0) + "%" : "") },
    ], steps.slice(0, MAX_STEP_ROWS)));
  }

  // ---- the page ----
  if (D.diff) {
    view("diff", "Diff", diffView);
  } else {
    // A hang first, as the text report puts it first.
    if (D.hang && D.hang.processes) view("hang", "Hang", hangView);
    view("overview", "Overview", overview);
    view("operators", "Operators", operators);
    view("kernels", "Kernels", kernels);
    view("memory", "Memory", memory);
    view("python", "Python", python);
    if (D.waiting_for && (D.waiting_for.steps || []).length) view("waiting", "Waiting for", waitingView);
    view("trace", "Trace & ptbpf", traceView);
  }
  const nav = document.getElementById("tabs"), main = document.getElementById("views");
  const sub = document.getElementById("subtitle");
  if (D.diff) {
    sub.append(`${D.diff.a}  vs  ${D.diff.b}`);
  } else {
    const st = D.trace_status || {};
    sub.append(D.trace, el("span", { cls: "badge" + (st.complete ? "" : " cut"), text: st.complete ? "complete" : (st.cut ? "cut" : "no end marker") }));
    // What the trace counted lost comes first, above every view.
    if (D.loss_line) sub.after(el("p", { id: "loss-line", cls: "loss", text: D.loss_line }));
  }
  const buttons = {};
  function show(id) {
    for (const v of views) {
      document.getElementById("view-" + v.id).classList.toggle("on", v.id === id);
      buttons[v.id].classList.toggle("on", v.id === id);
    }
    try {
      if (location.hash !== "#" + id) history.replaceState(null, "", "#" + id);
    } catch (e) { /* a page opened where history is not writable */ }
  }
  for (const v of views) {
    const sec = el("section", { cls: "view", id: "view-" + v.id });
    v.build(sec);
    main.append(sec);
    buttons[v.id] = el("button", { id: "tab-" + v.id, text: v.title, onclick: () => show(v.id) });
    nav.append(buttons[v.id]);
  }
  const first = location.hash.slice(1);
  show(views.some(v => v.id === first) ? first : views[0].id);
  document.body.setAttribute("data-ready", "1");
})();
