// The trace view, #/pool/<N>/p/<i>/t/<sample_id> (pool.js hands it the problem's page as TV.poolTrace): the text
// with each token coloured by its confidence, the sliding-window confidence curve with each online method's threshold
// and where the trace would stop under it (and where a live run did stop it), and on a token (click or focus) its
// top-k alternatives. Data: data/pool<N>/p<i>/traces.js, c<j>.js (the traces), c<j>_top.js (their alternatives,
// loaded when a token is first opened). Written by tracevote.explorer.trace_data.
"use strict";

(() => {
  const {el, link, fmt} = TV;
  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 960, HEIGHT = 240, PAD = {left: 52, right: 130, top: 12, bottom: 30};
  const METHOD_COLOURS = ["#1559b0", "#b3261e", "#6a3fb5", "#0b7a75", "#a15c00"];
  const STYLE = `
.tv-trace-layout { display: flex; gap: 16px; align-items: flex-start; }
.tv-trace-text { flex: 1 1 auto; white-space: pre-wrap; word-break: break-word; background: #fff; border: 1px solid #ddd;
  padding: 8px 12px; font: 13px/1.7 ui-monospace, "DejaVu Sans Mono", monospace; max-height: 70vh; overflow: auto; }
.tv-tok { cursor: pointer; border-radius: 2px; }
.tv-tok:focus, .tv-tok.tv-open { outline: 2px solid #24323f; }
.tv-tok.tv-stop { box-shadow: inset 0 -3px 0 var(--stop-colour, #000); }
.tv-reasoning { border-left: 4px solid #8a99a8; padding-left: 8px; margin-bottom: 8px; }
.tv-reasoning-label { font: 12px system-ui, sans-serif; color: #555; display: block; }
.tv-token-panel { flex: 0 0 320px; position: sticky; top: 8px; background: #fff; border: 1px solid #ddd;
  padding: 8px 12px; font-size: 13px; }
.tv-token-panel code { background: #eef1f4; padding: 0 3px; white-space: pre-wrap; }
.tv-curve { background: #fff; border: 1px solid #ddd; display: block; margin: 8px 0; }
.tv-legend span { display: inline-block; margin-right: 12px; }
.tv-scale { display: inline-block; width: 120px; height: 10px; vertical-align: middle;
  background: linear-gradient(90deg, hsl(0,75%,82%), hsl(60,75%,82%), hsl(120,75%,82%)); }`;

  function addStyle() {
    if (document.getElementById("tv-trace-style")) return;
    const style = document.createElement("style");
    style.id = "tv-trace-style";
    style.textContent = STYLE;
    document.head.appendChild(style);
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
    for (const child of children) node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    return node;
  }

  // The token texts: the trace's text cut by each token's length in UTF-16 units.
  function tokens(trace) {
    const out = new Array(trace.lens.length);
    let at = 0;
    trace.lens.forEach((length, k) => { out[k] = trace.text.slice(at, at + length); at += length; });
    return out;
  }

  function curvePoints(curve) {
    const values = curve.values;
    const ends = curve.ends || values.map((_, j) => curve.first + j);
    return values.map((value, j) => [ends[j], value]);
  }

  function totalTraces(index) {  // the problem's scored traces, not only those with a page (view.trace_pages)
    return index.scored !== undefined ? index.scored : index.chunks.reduce((sum, ids) => sum + ids.length, 0);
  }

  function methodLabel(method) {
    return method.replace(/^online_/, "online ");
  }

  // The curve as SVG: window means, each method's threshold line and would-stop marker, the live stop.
  function curveChart(trace, index) {
    const points = curvePoints(trace.curve);
    const n = Math.max(trace.lens.length, 1);
    const values = [...points.map(p => p[1]), ...index.thresholds.map(t => t.threshold)].filter(Number.isFinite);
    if (trace.live && Number.isFinite(trace.live.threshold)) values.push(trace.live.threshold);
    const low = values.length ? Math.min(...values) : 0, high = values.length ? Math.max(...values) : 1;
    const span = high > low ? high - low : 1;
    const x = k => PAD.left + (WIDTH - PAD.left - PAD.right) * (k / Math.max(n - 1, 1));
    const y = v => PAD.top + (HEIGHT - PAD.top - PAD.bottom) * (1 - (v - low) / span);
    const chart = svg("svg", {class: "tv-curve", width: WIDTH, height: HEIGHT, viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
                              role: "img", "aria-label": "sliding-window confidence curve"});
    const bottom = HEIGHT - PAD.bottom;
    chart.append(svg("line", {x1: PAD.left, x2: WIDTH - PAD.right, y1: bottom, y2: bottom, stroke: "#888"}),
                 svg("line", {x1: PAD.left, x2: PAD.left, y1: PAD.top, y2: bottom, stroke: "#888"}),
                 svg("text", {x: PAD.left - 6, y: y(high) + 4, "text-anchor": "end", "font-size": 11}, fmt(high, 2)),
                 svg("text", {x: PAD.left - 6, y: y(low) + 4, "text-anchor": "end", "font-size": 11}, fmt(low, 2)),
                 svg("text", {x: PAD.left, y: HEIGHT - 8, "font-size": 11}, "token 0"),
                 svg("text", {x: WIDTH - PAD.right, y: HEIGHT - 8, "text-anchor": "end", "font-size": 11},
                     `token ${n - 1}`));
    if (points.length) {
      chart.append(svg("polyline", {points: points.map(([k, v]) => `${x(k).toFixed(1)},${y(v).toFixed(1)}`).join(" "),
                                    fill: "none", stroke: "#24323f", "stroke-width": 1.5, "data-curve": points.length}));
    }
    const ends = new Map(points);
    index.thresholds.forEach((t, m) => {
      if (!Number.isFinite(t.threshold)) return;
      const colour = METHOD_COLOURS[m % METHOD_COLOURS.length];
      chart.append(svg("line", {x1: PAD.left, x2: WIDTH - PAD.right, y1: y(t.threshold), y2: y(t.threshold),
                                stroke: colour, "stroke-dasharray": "5 4", "data-threshold": t.method}),
                   svg("text", {x: WIDTH - PAD.right + 4, y: y(t.threshold) + 4, fill: colour, "font-size": 11},
                       `${methodLabel(t.method)} ${fmt(t.threshold, 2)}`));
      const spent = trace.stops[t.method];
      if (spent !== null && spent !== undefined) {
        const k = spent - 1;
        chart.append(svg("line", {x1: x(k), x2: x(k), y1: PAD.top, y2: bottom, stroke: colour, "stroke-width": 1,
                                  "data-would-stop": t.method, "data-token": k}),
                     svg("circle", {cx: x(k), cy: y(ends.has(k) ? ends.get(k) : t.threshold), r: 4, fill: colour}));
      }
    });
    if (trace.live && trace.live.reason === "confidence") {
      const k = trace.live.spent - 1;
      chart.append(svg("line", {x1: x(k), x2: x(k), y1: PAD.top, y2: bottom, stroke: "#000", "stroke-width": 2,
                                "data-live-stop": trace.live.method, "data-token": k}));
    }
    return chart;
  }

  function stopLines(trace, index) {
    const lines = index.live ? [] : index.thresholds.map((t, m) => {
      const spent = trace.stops[t.method];
      const colour = METHOD_COLOURS[m % METHOD_COLOURS.length];
      const where = spent === null || spent === undefined
        ? "never falls below it: runs to its end"
        : `would stop after ${spent} tokens (at token ${spent - 1})`;
      return el("li", {"data-method": t.method, style: {color: colour}},
                `${methodLabel(t.method)} (percentile ${t.percentile}): threshold ${fmt(t.threshold, 3)} `
                + `(range over working sets ${fmt(t.low, 3)} to ${fmt(t.high, 3)}); ${where}`);
    });
    if (trace.live) {
      const live = trace.live;
      lines.push(el("li", {"data-live": live.method, "data-reason": live.reason},
                    `live ${methodLabel(live.method)}, threshold ${fmt(live.threshold, 3)}: `
                    + (live.reason === "confidence"
                      ? `stopped by it after ${live.spent} tokens (at token ${live.spent - 1}; ${live.received} arrived)`
                      : `not stopped by it (${live.reason}), ${live.spent} tokens kept of ${live.received}`)));
    }
    if (index.live && !trace.live) lines.push(el("li", {}, "a warmup trace: it ran in full and set the threshold"));
    if (!index.live && !index.thresholds.length) {
      lines.push(el("li", {}, `no online replay at K = ${index.k} (below the warmup of ${index.warmup} traces)`));
    }
    return el("ul", {class: "tv-stops"}, lines);
  }

  function tokenText(text) {
    return JSON.stringify(text).slice(1, -1);
  }

  // The panel of one token: its confidence, chosen logprob and alternatives.
  const ABSENT = 65535;  // trace_data.packed_top: minus each logprob in hundredths of a nat, uint16, base64

  // trace_data.packed: base64 of zlib's deflate, inflated by the browser's own DecompressionStream
  async function inflated(text) {
    const bytes = Uint8Array.from(atob(text), c => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new DataView(await new Response(stream).arrayBuffer());
  }

  function topRow(top, k) {
    const row = [];
    for (let rank = 0; rank < top.k; rank++) {
      const at = 2 * (k * top.k + rank);
      if (at + 2 > top.rows.byteLength) break;
      const value = top.rows.getUint16(at, true);
      row.push(value === ABSENT ? null : -value / 100);
    }
    return row;
  }

  // trace_data.top_chunk: each alternative's string as an index into the chunk's vocabulary (uint16 or uint32)
  function topStrings(top, k) {
    const width = top.chunk.width, strings = [];
    for (let rank = 0; rank < top.k; rank++) {
      const at = width * (k * top.k + rank);
      if (at + width > top.indices.byteLength) break;
      strings.push(top.chunk.vocab[width === 2 ? top.indices.getUint16(at, true) : top.indices.getUint32(at, true)]);
    }
    return strings;
  }

  let shown = 0;  // the latest token asked for: an earlier one's alternatives arriving late are dropped

  async function showToken(panel, trace, index, texts, k, loadTop) {
    const asked = ++shown;
    panel.setAttribute("data-i", String(k));
    panel.removeAttribute("data-ready");
    panel.replaceChildren(el("h2", {}, `Token ${k}`), el("p", {}, el("code", {}, tokenText(texts[k]))),
                          el("p", {}, `confidence ${fmt(trace.conf[k], 3)}, chosen logprob ${fmt(trace.chosen[k], 3)}`));
    const top = await loadTop();
    if (asked !== shown) return;  // another token was opened meanwhile
    if (!top || !top.top) {
      panel.append(el("p", {}, top === null && index.live
        ? "A live run keeps a trace's top-k only where its stop rule needs them: none here."
        : "This pool keeps no top-k logprobs (pool.keep_top_logprobs: false)."));
      panel.setAttribute("data-ready", "true");
      return;
    }
    const row = topRow(top, k);
    const strings = top.top_tokens ? topStrings(top, k) : null;
    const rows = row.map((logprob, rank) => el("tr", {"data-rank": rank, "data-logprob": logprob === null ? "" : logprob,
                                                       "data-token": strings ? strings[rank] : null},
      el("td", {class: "number"}, String(rank + 1)),
      strings ? el("td", {}, el("code", {}, tokenText(strings[rank] || ""))) : null,
      el("td", {class: "number"}, fmt(logprob, 2)),
      el("td", {class: "number"}, logprob === null ? "—" : `${(100 * Math.exp(logprob)).toFixed(2)}%`)));
    panel.append(
      el("table", {class: "tv-table", "data-alternatives": row.length},
         el("thead", {}, el("tr", {}, el("th", {}, "#"), strings ? el("th", {}, "token") : null,
                                 el("th", {}, "logprob"), el("th", {}, "prob"))),
         el("tbody", {}, rows)));
    if (!strings) {
      panel.append(el("p", {class: "tv-summary"}, "The alternatives' strings are not kept (pool.keep_top_tokens: false)."));
    }
    panel.setAttribute("data-ready", "true");
  }

  function textView(trace, texts, stopAt, open) {
    const [low, high] = trace.range;
    const spans = texts.map((text, k) => {
      const conf = trace.conf[k];
      const stop = stopAt.get(k);
      const span = el("span", {class: stop ? "tv-tok tv-stop" : "tv-tok", tabindex: 0, "data-i": k,
                               "data-conf": conf === null ? "" : conf, "data-chosen": trace.chosen[k] === null ? ""
                                 : trace.chosen[k], "data-stop": stop ? stop.join(" ") : null,
                               title: `token ${k}: confidence ${fmt(conf, 3)}`,
                               style: {background: TV.confidenceColor(conf, low, high)}}, text);
      return span;
    });
    const body = el("div", {class: "tv-trace-text", "data-tokens": texts.length,
                            onclick: event => { const k = event.target.getAttribute("data-i"); if (k) open(Number(k)); },
                            onfocusin: event => { const k = event.target.getAttribute("data-i"); if (k) open(Number(k)); }});
    if (trace.reasoning > 0) {
      body.append(el("div", {class: "tv-reasoning", "data-reasoning": trace.reasoning},
                     el("span", {class: "tv-reasoning-label"}, "thinking (split out by the server's reasoning parser)"),
                     spans.slice(0, trace.reasoning)));
    }
    body.append(...spans.slice(trace.reasoning));
    return body;
  }

  // A pool's trace: its chunk and the problem's thresholds (trace_data.trace_sections); null without the samples.
  async function poolTrace(problem, n, i, sampleId) {
    if (!problem.trace_data) return null;
    const index = await TV.need(problem.trace_data);
    const j = index.chunks.findIndex(ids => ids.includes(sampleId));
    const subset = problem.trace_subset;
    if (j < 0 && subset && (problem.traces.sample_id || []).includes(sampleId)) return {subset};
    if (j < 0) throw new Error(`problem ${problem.id} has no trace ${sampleId}`);
    const trace = (await TV.need(`pool${n}/p${i}/c${j}`)).traces.find(t => t.id === sampleId);
    return {index, trace, topPath: `pool${n}/p${i}/c${j}_top`};
  }

  // A live run's trace (live_traces.live_sections): its ledger m's chunk; the threshold it was streamed under.
  async function liveTrace(problem, n, i, ledgerText, index) {
    const live = problem.live;
    const m = Number(ledgerText);
    const ledger = live && /^\d+$/.test(ledgerText) ? live.ledgers[m] : undefined;
    if (!ledger) throw new Error(`problem ${problem.id} has no live run ledger ${JSON.stringify(ledgerText)}`);
    const j = ledger.chunks.findIndex(ids => ids.includes(index));
    if (j < 0) throw new Error(`the live run's ${ledger.name} ledger has no trace ${index} of problem ${problem.id}`);
    const trace = (await TV.need(`pool${n}/p${i}/l${m}_c${j}`)).traces.find(t => t.id === index);
    const thresholds = trace.live && Number.isFinite(trace.live.threshold) ? [{
      method: trace.live.method, percentile: null, threshold: trace.live.threshold, low: null, high: null}] : [];
    return {trace, topPath: `pool${n}/p${i}/l${m}_c${j}_top`,
            index: {live: ledger.name, signal: live.signal, top_k: live.top_k, group_size: live.group_size,
                    warmup: live.warmup, budget: live.budget, thresholds, has_top: ledger.has_top}};
  }

  TV.poolTrace = async (route, main, problem) => {
    addStyle();
    const [n, , i, , sampleText] = route.parts;
    const sampleId = Number(sampleText);
    TV.fill(main, TV.banner(problem.simulated),
                el("div", {class: "tv-crumbs"}, link("#/", "sections"), " › ", link(`#/pool/${n}`, problem.label),
                   " › ", link(`#/pool/${n}/p/${i}`, `problem ${problem.id}`), " › ", `trace ${sampleId}`),
                el("h1", {}, `${route.query.has("live") ? "Live run trace" : "Trace"} ${sampleId} of problem ${problem.id}`));
    const found = route.query.has("live") ? await liveTrace(problem, n, i, route.query.get("live"), sampleId)
      : await poolTrace(problem, n, i, sampleId);
    if (!found) {
      TV.fill(main, el("p", {}, "This project holds the pool's score table but not its samples, so the trace's "
                              + "tokens cannot be shown (dvc pull the pool, then rebuild the site)."));
      return;
    }
    if (found.subset) {
      TV.fill(main, el("p", {"data-no-trace-page": "true"}, `This trace has no page: only the ${found.subset.per_end} `
        + `most and ${found.subset.per_end} least confident traces of the problem by ${found.subset.by} have one `
        + `(view.trace_pages: ${found.subset.per_end}; null gives every trace a page). Its row is on the problem's page.`));
      return;
    }
    const {index, trace, topPath} = found;
    const texts = tokens(trace);
    const stopAt = new Map();
    for (const [method, spent] of Object.entries(trace.stops)) {
      if (spent !== null) stopAt.set(spent - 1, [...(stopAt.get(spent - 1) || []), method]);
    }
    if (trace.live && trace.live.reason === "confidence") {
      stopAt.set(trace.live.spent - 1, [...(stopAt.get(trace.live.spent - 1) || []), "live"]);
    }
    let topChunk = null;
    const loadTop = async () => {
      if (!index.has_top) return null;
      if (!topChunk) {
        const chunk = await TV.need(topPath);
        const trace = chunk.traces.find(t => t.id === sampleId);
        topChunk = {...trace, chunk, rows: trace.top ? await inflated(trace.top) : null,
                    indices: trace.top_tokens ? await inflated(trace.top_tokens) : null};
      }
      return topChunk;
    };
    const panel = el("aside", {class: "tv-token-panel", id: "tv-token-panel"},
                     el("p", {}, "Click or focus a token to see its top-k alternatives."));
    let opened = null;
    const open = k => {
      if (opened && opened.getAttribute("data-i") === String(k)) return;  // a click also focuses: open once
      if (opened) opened.classList.remove("tv-open");
      opened = text.querySelector(`[data-i="${k}"]`);
      if (opened) opened.classList.add("tv-open");
      showToken(panel, trace, index, texts, k, loadTop).catch(error => {
        panel.replaceChildren(el("div", {class: "tv-error", role: "alert"}, `Error: ${error.message || error}`));
        throw error;
      });
    };
    const text = textView(trace, texts, stopAt, open);
    const [low, high] = trace.range;
    TV.fill(main,
      el("p", {class: "tv-summary"}, `answer ${fmt(trace.answer)}, finish ${trace.finish}, ${texts.length} tokens. `
         + `Token signal ${index.signal}${index.top_k ? ` at top-${index.top_k}` : ""} (confidence.token), `
         + `windows of ${index.group_size} tokens (confidence.group_size); `
         + (index.live ? `a live run's trace (${index.live}; budget ${index.budget}, warmup ${index.warmup}).`
           : `thresholds at K = ${index.k} (report.k), warmup ${index.warmup}: the median over `
             + (index.k < totalTraces(index) ? `${index.repeat} working sets (eval.repeat, eval.seed ${index.seed}).`
               : "the whole pool, one working set."))),
      el("h2", {}, "Sliding-window confidence"),
      trace.curve.values.length ? curveChart(trace, index)
        : el("p", {"data-no-curve": "true"}, `Fewer than ${index.group_size} tokens with a confidence: no full `
                                             + "window, so online DeepConf never stops this trace."),
      stopLines(trace, index),
      el("h2", {}, "Tokens"),
      el("p", {class: "tv-legend"}, el("span", {}, `${fmt(low, 2)} `, el("i", {class: "tv-scale"}), ` ${fmt(high, 2)}`),
         el("span", {}, "colour: the token's confidence (5th to 95th percentile of this trace)"),
         el("span", {}, "underlined: a stop token")),
      el("div", {class: "tv-trace-layout"}, text, panel));
  };
})();
