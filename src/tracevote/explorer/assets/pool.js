// The DeepConf pool views: #/pool/<N> (the index of problems), #/pool/<N>/p/<i> (a problem's traces) and
// #/pool/<N>/p/<i>/t/<sample_id> (a trace: TV.poolTrace draws it where the trace view is in the site).
"use strict";

(() => {
  const {el, link, fmt} = TV;

  function mark(right) {
    if (right === null || right === undefined) return "";
    return right ? "✓" : "✗";
  }

  function crumbs(...items) {
    return el("div", {class: "tv-crumbs"}, items.map((item, i) => [i ? " › " : null, item]));
  }

  function methodColumns(pool) {
    return pool.methods.map(method => ({
      key: `m_${method.name}`, label: method.label, kind: "number",
      title: `${method.label}: its usual answer, right (✓) when right in most working sets (accuracy above 50%), `
        + "and that accuracy in percent; sorts by the accuracy",
      text: row => {
        const accuracy = row[`m_${method.name}`];
        if (accuracy === null || accuracy === undefined) return "—";
        if (method.name === "pass1") return `${fmt(accuracy, 1)}%`;
        return `${fmt(row[`a_${method.name}`])} ${mark(accuracy > 50)} ${fmt(accuracy, 1)}%`;
      },
    }));
  }

  const INDEX_FILTERS = [
    {id: "wrong_cons", label: "wrong under Cons", test: row => !row.cons_right},
    {id: "wrong_filter", label: "wrong under a filter method", test: row => row.wrong_filter},
    {id: "disagree", label: "methods disagree", test: row => row.disagree},
  ];

  // What the trace pages (trace.js) show, or why there are none (trace_data.trace_settings).
  function tracePagesNote(pages) {
    if (!pages) return null;
    if (!pages.built) {
      return el("p", {class: "tv-summary", "data-trace-pages": "none"}, "No trace pages: this project holds the "
        + "pool's score table but not its samples (dvc pull the pool, then python -m tracevote view).");
    }
    return el("p", {class: "tv-summary", "data-trace-pages": "built"}, `Each trace's page: tokens coloured by `
      + `${pages.signal}${pages.top_k ? ` at top-${pages.top_k}` : ""} (confidence.token), windows of `
      + `${pages.group_size} tokens, each online method's threshold at K = ${pages.k} (warmup ${pages.warmup}). `
      + (pages.per_end === null || pages.per_end === undefined ? "Every trace has one (view.trace_pages: null)."
        : `A problem's ${pages.per_end} most and ${pages.per_end} least confident traces by ${pages.by} have one `
          + `(view.trace_pages; a problem of at most ${2 * pages.per_end} traces: every trace).`));
  }

  // "wrong under <method>" (f=wrong_<method>), offered only when a link asks for it (a study or compare row's:
  // tracevote.explorer.table_pages), so the toolbar keeps its three filters.
  function methodFilters(pool, query) {
    const chosen = new Set(query.getAll("f"));
    const known = new Set(INDEX_FILTERS.map(filter => filter.id));
    return pool.methods.filter(method => chosen.has(`wrong_${method.name}`) && !known.has(`wrong_${method.name}`))
      .map(method => ({id: `wrong_${method.name}`, label: `wrong under ${method.label}`,
                       test: row => row[`m_${method.name}`] !== null && row[`m_${method.name}`] <= 50}));
  }

  // A link asking for "wrong under" a method this pool's aggregate holds no per-problem result of (a study or compare
  // row's online method, say, where the pool's aggregate has none): said above the table, which then shows every
  // problem, rather than left to look filtered.
  function unknownMethodNote(pool, query) {
    const known = new Set([...INDEX_FILTERS.map(filter => filter.id), ...pool.methods.map(m => `wrong_${m.name}`)]);
    const asked = query.getAll("f").filter(id => id.startsWith("wrong_") && !known.has(id));
    if (!asked.length) return null;
    const names = asked.map(id => id.slice("wrong_".length)).join(", ");
    return el("p", {class: "tv-summary", "data-unknown-filter": "true"}, `The link asked for the problems ${names} `
      + `got wrong, but this pool's aggregate has no per-problem result of ${asked.length > 1 ? "those methods" : "it"}`
      + ` at K = ${pool.k}: every problem is shown.`);
  }

  // pass@K and avg@K (tracevote.deepconf.passk): exact over every working set of K of a problem's traces.
  function passAtKColumns(pool) {
    if (!pool.pass_at_k) return [];  // an aggregate written before they were
    return [
      {key: "pass_at_k", label: `pass@${pool.k}`, kind: "number", digits: 1,
       title: `the chance that at least one of ${pool.k} of the problem's traces is right: 1 - C(n-c, K)/C(n, K)`},
      {key: "avg_at_k", label: `avg@${pool.k}`, kind: "number", digits: 1,
       title: "the mean correctness of K traces: c/n, whatever K"},
    ];
  }

  function passAtKSummary(passAtK, k) {
    if (!passAtK) return null;
    return `; pass@${k} ${fmt(passAtK.pass_at_k, 1)}%, avg@${k} ${fmt(passAtK.avg_at_k, 1)}% over the problems`;
  }

  async function poolIndex(route, main, n) {
    const pool = await TV.need(`pool${n}/index`);
    const columns = [
      {key: "i", label: "#", kind: "number", title: "the problem's number in this pool"},
      {key: "id", label: "problem", kind: "text"},
      {key: "gold", label: "gold", kind: "text"},
      {key: "traces", label: "traces", kind: "number"},
      {key: "valid", label: "valid", kind: "number", title: "traces with an answer"},
      ...passAtKColumns(pool),
      ...methodColumns(pool),
      {key: "distinct", label: "answers", kind: "number", title: "distinct answers among the valid traces"},
      {key: "answers", label: "most given (answer×traces)", kind: "text"},
    ];
    TV.fill(main,
      TV.banner(pool.simulated),
      crumbs(link("#/", "sections"), pool.label),
      el("h1", {}, pool.label),
      el("p", {class: "tv-summary"}, `${pool.problems.length} problems at K = ${pool.k} (report.k), `
        + `${pool.repeat} working sets per problem`, pool.model ? `; model ${pool.model}` : null,
        passAtKSummary(pool.pass_at_k, pool.k),
        ". Each method: its usual answer, ✓ when right in most working sets, its accuracy over them."),
      tracePagesNote(pool.trace_pages),
      unknownMethodNote(pool, route.query),
      TV.table({columns, rows: pool.problems, filters: [...INDEX_FILTERS, ...methodFilters(pool, route.query)],
                sort: {key: "i", dir: 1},
                rowLink: row => `#/pool/${n}/p/${row.i}`, query: route.query}));
  }

  function traceRows(problem) {
    const columns = problem.traces;
    const count = columns.sample_id ? columns.sample_id.length : 0;
    const names = Object.keys(columns);
    const rows = new Array(count);
    for (let j = 0; j < count; j++) {
      const row = {};
      for (const name of names) row[name] = columns[name][j];
      rows[j] = row;
    }
    return rows;
  }

  function traceColumns(problem) {
    return [
      {key: "sample_id", label: "trace", kind: "number", title: "the trace's sample id in the pool"},
      {key: "answer", label: "answer", kind: "number"},
      {key: "answer_source", label: "from", kind: "text",
       title: "where the answer came from: boxed, the fallback (the last number), or none"},
      {key: "correct", label: "right", kind: "bool"},
      {key: "valid", label: "valid", kind: "bool", title: "it has an answer and votes"},
      {key: "n_tokens", label: "tokens", kind: "number"},
      {key: "finish_reason", label: "finish", kind: "text"},
      ...problem.measures.map(measure => ({key: measure, label: measure, kind: "number", digits: 3,
                                           title: `the ${measure} confidence measure (higher = surer)`})),
    ];
  }

  const TRACE_FILTERS = [
    {id: "right", label: "right", test: row => row.correct === true},
    {id: "wrong", label: "wrong", test: row => row.correct === false},
    {id: "valid", label: "valid", test: row => row.valid === true},
  ];

  // view.trace_pages (trace_subset.py): only some traces have a trace page; the others' rows are not links.
  function hasPage(problem, sampleId) {
    const subset = problem.trace_subset;
    if (!subset) return true;
    if (!subset.set) subset.set = new Set(subset.ids);
    return subset.set.has(sampleId);
  }

  function subsetNote(subset) {
    if (!subset) return null;
    return el("p", {class: "tv-summary", "data-trace-subset": "true"}, `${subset.pages} of these ${subset.traces} `
      + `traces have a trace page (their rows are links): the ${subset.per_end} most and ${subset.per_end} least `
      + `confident by ${subset.by} (view.trace_pages: ${subset.per_end}, view.trace_pages_by: ${subset.by}; `
      + "view.trace_pages: null gives every trace a page).");
  }

  function problemHead(problem, n, i) {
    return [
      TV.banner(problem.simulated),
      crumbs(link("#/", "sections"), link(`#/pool/${n}`, problem.label), `problem ${problem.id}`),
      el("h1", {}, `Problem ${problem.id}`),
      el("div", {class: "tv-problem-text", "data-problem-text": "true"}, problem.problem),
      el("p", {}, "Gold: ", el("strong", {}, problem.gold)),
      problem.pass_at_k && problem.pass_at_k.samples !== null
        ? el("p", {"data-pass-at-k": "true"}, `${problem.pass_at_k.correct} of ${problem.pass_at_k.samples} traces `
          + `right: pass@${problem.k} ${fmt(problem.pass_at_k.pass_at_k, 1)}%, `
          + `avg@${problem.k} ${fmt(problem.pass_at_k.avg_at_k, 1)}%`)
        : null,
    ];
  }

  async function problemPage(route, main, n, i) {
    const problem = await TV.need(`pool${n}/p${i}`);
    const results = problem.results.map(result => ({
      method: (problem.methods.find(m => m.name === result.method) || {label: result.method}).label,
      answer: result.method === "pass1" ? null : result.answer, right: result.right, accuracy: result.accuracy}));
    TV.fill(main,
      ...problemHead(problem, n, i),
      el("div", {class: "tv-side"},
        el("section", {},
          el("h2", {}, `Methods at K = ${problem.k}`),
          TV.table({columns: [
            {key: "method", label: "method", kind: "text"},
            {key: "answer", label: "usual answer", kind: "number"},
            {key: "right", label: "right", kind: "bool", title: "right in most working sets"},
            {key: "accuracy", label: "accuracy %", kind: "number", digits: 2, title: "over the working sets"},
          ], rows: results})),
        el("section", {},
          el("h2", {}, "Answers of the valid traces"),
          el("div", {class: "tv-dist"}, problem.distribution.map(d => el("span", {class: d.right ? "gold" : null},
            `${d.answer} ${mark(d.right)} ×${d.count}`))))),
      el("h2", {}, "Traces"),
      subsetNote(problem.trace_subset),
      TV.table({columns: traceColumns(problem), rows: traceRows(problem), filters: TRACE_FILTERS,
                sort: problem.measures.length ? {key: problem.measures[0], dir: -1} : {key: "sample_id", dir: 1},
                rowLink: row => hasPage(problem, row.sample_id) ? `#/pool/${n}/p/${i}/t/${row.sample_id}` : null,
                query: route.query}));
    if (problem.live && problem.live.traces.length) {  // the dataset's live run (trace.js draws its traces)
      TV.fill(main, el("h2", {}, "Live run"), TV.table({columns: [
        {key: "method", label: "ledger", kind: "text", title: "warmup, or the live method (online.live.methods)"},
        {key: "index", label: "trace", kind: "number"},
        {key: "stop_reason", label: "ended", kind: "text"},
        {key: "kept", label: "kept", kind: "number", title: "tokens kept (up to the stop token)"},
        {key: "received", label: "received", kind: "number", title: "tokens that arrived before the stream closed"},
        {key: "threshold", label: "threshold", kind: "number", digits: 3},
      ], rows: problem.live.traces, rowLink: row => `#/pool/${n}/p/${i}/t/${row.index}?live=${row.ledger}`}));
    }
  }

  async function tracePage(route, main, n, i, sampleId) {
    const problem = await TV.need(`pool${n}/p${i}`);
    if (typeof TV.poolTrace === "function") {
      await TV.poolTrace(route, main, problem);
      return;
    }
    const row = traceRows(problem).find(r => String(r.sample_id) === sampleId);
    if (!row) throw new Error(`problem ${problem.id} has no trace ${sampleId}`);
    TV.fill(main, ...problemHead(problem, n, i), el("h2", {}, `Trace ${sampleId}`),
                TV.table({columns: traceColumns(problem), rows: [row]}));
  }

  TV.views.pool = async (route, main) => {
    const [n, p, i, t, sampleId] = route.parts;
    if (!/^\d+$/.test(n || "")) throw new Error(`no pool "${n}": a pool is a number (#/pool/0)`);
    if (p === undefined) return poolIndex(route, main, n);
    if (p !== "p" || !/^\d+$/.test(i || "")) throw new Error(`not a pool page: #/pool/${route.parts.join("/")}`);
    if (t === undefined) return problemPage(route, main, n, i);
    if (t !== "t" || !/^\d+$/.test(sampleId || "")) throw new Error(`not a trace: #/pool/${route.parts.join("/")}`);
    return tracePage(route, main, n, i, sampleId);
  };
})();
