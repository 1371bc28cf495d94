// tracevote explorer core: data files, routing, and the page helpers every view uses.
// Data arrive only as script files (`TV.put(path, value)`): fetch and XHR do not work from file://.
"use strict";

const TV = (() => {
  const DATA_PATH = /^[a-z0-9_]+(\/[a-z0-9_]+)*$/;
  const store = new Map();
  const loading = new Map();
  const views = {};

  function put(path, value) {
    store.set(path, value);
  }

  // The value of data/<path>.js, loading it once by a script tag.
  function need(path) {
    if (!DATA_PATH.test(path)) return Promise.reject(new Error(`not a data path: ${JSON.stringify(path)}`));
    if (store.has(path)) return Promise.resolve(store.get(path));
    if (!loading.has(path)) {
      loading.set(path, new Promise((resolve, reject) => {
        const script = document.createElement("script");
        const file = `data/${path}.js`;
        script.src = file;
        script.onload = () => {
          if (store.has(path)) resolve(store.get(path));
          else reject(new Error(`${file} loaded but did not put "${path}"`));
        };
        script.onerror = () => {
          loading.delete(path);
          reject(new Error(`missing data file ${file}: rebuild the site (python -m tracevote view)`));
        };
        document.head.appendChild(script);
      }));
    }
    return loading.get(path);
  }

  // An element; children are nodes, strings (always text, never HTML), arrays or null.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "style") Object.assign(node.style, value);
      else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
      else if (key === "title" || key === "href" || key === "id" || key.startsWith("data-") || key.startsWith("aria-")
               || key === "role" || key === "tabindex" || key === "type") node.setAttribute(key, String(value));
      else throw new Error(`TV.el: unknown property ${key}`);
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children) {
      if (child === null || child === undefined) continue;
      if (Array.isArray(child)) append(node, child);
      else if (child instanceof Node) node.appendChild(child);
      else node.appendChild(document.createTextNode(String(child)));
    }
  }

  function link(hash, text) {
    return el("a", {href: hash}, text);
  }

  function banner(simulated) {
    if (!simulated) return null;
    return el("div", {class: "tv-banner", role: "alert", "data-simulated": "true"},
              "SIMULATED MODEL: these traces test the pipeline, not a real LLM");
  }

  // main.append(...) with what TV.el's children may be: nodes, strings, arrays, and null or undefined skipped (the
  // DOM's own append would write "null" for a banner a real model's page does not have).
  function fill(parent, ...children) {
    for (const child of children.flat(Infinity)) {
      if (child !== null && child !== undefined) parent.append(child);
    }
    return parent;
  }

  function fmt(value, digits) {
    if (value === null || value === undefined || (typeof value === "number" && Number.isNaN(value))) return "—";
    if (typeof value === "number") return digits === undefined ? String(value) : value.toFixed(digits);
    if (typeof value === "boolean") return value ? "yes" : "no";
    return String(value);
  }

  // Red (low) through yellow to green (high); grey for a missing value.
  function confidenceColor(value, low, high) {
    if (value === null || value === undefined || !Number.isFinite(value)) return "hsl(0, 0%, 88%)";
    const span = high - low;
    const share = span > 0 ? Math.min(1, Math.max(0, (value - low) / span)) : 0.5;
    return `hsl(${Math.round(share * 120)}, 75%, 82%)`;
  }

  function compare(a, b) {
    const aMissing = a === null || a === undefined || (typeof a === "number" && Number.isNaN(a));
    const bMissing = b === null || b === undefined || (typeof b === "number" && Number.isNaN(b));
    if (aMissing || bMissing) return aMissing === bMissing ? 0 : aMissing ? 1 : -1;  // missing last either way
    if (typeof a === "number" && typeof b === "number") return a - b;
    if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
    return String(a).localeCompare(String(b), undefined, {numeric: true});
  }

  function cellText(column, value, row) {
    if (column.text) return String(column.text(row));
    if (column.kind === "number") return fmt(value, column.digits);
    if (column.kind === "bool") return value === null || value === undefined ? "—" : value ? "✓" : "✗";
    return fmt(value);
  }

  // A sortable, filterable table; the returned element's data-rows is the number of rows shown (those the filters
  // pass; past pageSize of them only the first pageSize are drawn until "show all" is clicked: a paper-scale problem
  // has 4,096 traces). A column may give text(row), the cell's text, while it sorts by row[key]; `query` (default:
  // the hash's) selects filters (f=id).
  function table({columns, rows, filters = [], sort = null, rowLink = null, query = null, pageSize = 500}) {
    const active = new Set();
    const chosen = (query || parseHash(location.hash).query).getAll("f");
    for (const id of chosen) if (filters.some(f => f.id === id)) active.add(id);
    let order = sort ? {...sort} : null;
    // right-aligned: the number columns, but one holding texts (a math pool's answers, \frac{1}{2}) is aligned as text
    const numeric = new Set(columns.filter(column => column.kind === "number"
      && !rows.some(row => typeof row[column.key] === "string")).map(column => column.key));
    const box = el("div", {class: "tv-table-box"});
    const count = el("span", {class: "tv-count"});
    const buttons = filters.map(filter => el("button", {
      type: "button", "data-filter": filter.id, "aria-pressed": String(active.has(filter.id)),
      onclick: event => {
        if (active.has(filter.id)) active.delete(filter.id); else active.add(filter.id);
        event.currentTarget.setAttribute("aria-pressed", String(active.has(filter.id)));
        render();
      }}, filter.label));
    const heads = columns.map(column => el("th", {
      title: column.title || null, "data-key": column.key,
      onclick: () => {
        order = order && order.key === column.key ? {key: column.key, dir: -order.dir}
          : {key: column.key, dir: column.kind === "text" ? 1 : -1};
        render();
      }}, column.label));
    let limit = pageSize;
    const more = el("button", {type: "button", class: "tv-more", onclick: () => { limit = Infinity; render(); }});
    const body = el("tbody");
    const grid = el("table", {class: "tv-table"}, el("thead", {}, el("tr", {}, heads)), body);
    if (filters.length) box.appendChild(el("div", {class: "tv-filters"}, "Show only:", buttons, count));
    box.appendChild(grid);
    box.appendChild(more);

    function render() {
      const tests = filters.filter(f => active.has(f.id)).map(f => f.test);
      let shown = rows.filter(row => tests.every(test => test(row)));
      if (order) {
        const {key, dir} = order;
        shown = shown.slice().sort((a, b) => dir * compare(a[key], b[key]));
      }
      heads.forEach((head, i) => {
        const sorted = order && order.key === columns[i].key;
        if (sorted) head.setAttribute("aria-sort", order.dir > 0 ? "ascending" : "descending");
        else head.removeAttribute("aria-sort");
      });
      const fragment = document.createDocumentFragment();
      for (const row of shown.slice(0, limit)) {
        const hash = rowLink ? rowLink(row) : null;
        const cells = columns.map(column => {
          const value = row[column.key];
          const mark = column.kind === "bool" && value !== null && value !== undefined
            ? (value ? "tv-right" : "tv-wrong") : "";
          return el("td", {class: `${numeric.has(column.key) ? "number" : ""} ${mark}`.trim() || null},
                    cellText(column, value, row));
        });
        const tr = el("tr", hash ? {class: "tv-link", "data-href": hash, onclick: () => { location.hash = hash; }}
          : {}, cells);
        if (hash) {
          const first = tr.firstChild;
          const text = first.textContent;
          first.textContent = "";
          first.appendChild(link(hash, text));
        }
        fragment.appendChild(tr);
      }
      body.replaceChildren(fragment);
      box.setAttribute("data-rows", String(shown.length));
      count.textContent = `${shown.length} of ${rows.length}`;
      more.hidden = shown.length <= limit;
      more.textContent = `show all ${shown.length} rows (the first ${Math.min(limit, shown.length)} are drawn)`;
    }

    render();
    return box;
  }

  function parseHash(hash) {
    const text = hash.replace(/^#\/?/, "");
    const [path, search] = text.split("?", 2);
    const parts = path.split("/").filter(part => part !== "").map(decodeURIComponent);
    return {view: parts.length ? parts[0] : "", parts: parts.slice(1), query: new URLSearchParams(search || "")};
  }

  function showError(main, error) {
    main.replaceChildren(el("div", {class: "tv-error", role: "alert"}, `Error: ${error.message || error}`));
  }

  let routed = 0;
  async function route() {
    const main = document.getElementById("tv-main");
    const current = ++routed;
    const where = parseHash(location.hash);
    main.replaceChildren();
    main.removeAttribute("data-ready");
    const view = where.view === "" ? indexView : views[where.view];
    try {
      if (!view) throw new Error(`no view "${where.view}" in this site (from ${location.hash})`);
      await view(where, main);
      if (current === routed) main.setAttribute("data-ready", "true");
    } catch (error) {
      if (current === routed) showError(main, error);
      throw error;
    }
  }

  async function indexView(where, main) {
    const index = await need("index");
    fill(main,
      banner(index.simulated),
      el("h1", {}, index.title),
      index.sections.length
        ? el("ul", {class: "tv-sections"}, index.sections.map(section => el("li", {"data-view": section.view},
          link(`#/${section.view}/${section.index}`, section.label), section.simulated ? " (SIMULATED) " : " ",
          section.summary ? el("span", {class: "tv-summary"}, `— ${section.summary}`) : null)))
        : el("p", {}, "No section: the project has no built pool, debate, critique or grading run yet."));
  }

  function start() {
    window.addEventListener("hashchange", route);
    route();
  }

  document.addEventListener("DOMContentLoaded", start);

  return {put, need, views, el, link, banner, fill, fmt, table, confidenceColor, parseHash, compare};
})();
