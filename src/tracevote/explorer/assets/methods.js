/* The explorer's method views: debate transcripts, critiques, grading items, the study and compare tables.
   Data come from data/<view><N>/... (tracevote.explorer.debate_pages, critique_pages, grading_pages,
   table_pages). Every text from a run is put on the page as a text node (TV.el's string children). */
(function () {
  "use strict";
  const el = TV.el;

  const STYLE = `
.tv-facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.15em 1em; margin: 0.6em 0; }
.tv-facts dt { font-weight: 600; }
.tv-facts dd { margin: 0; }
.tv-text { white-space: pre-wrap; word-break: break-word; background: #f6f6f4; border: 1px solid #ddd;
  padding: 0.5em 0.7em; margin: 0.3em 0; max-height: 28em; overflow: auto; font-size: 0.9em; }
.tv-round { margin: 1em 0; }
.tv-reply { border-left: 4px solid #bbb; padding: 0.2em 0 0.2em 0.8em; margin: 0.6em 0; }
.tv-reply.right { border-left-color: #2a8a3e; }
.tv-reply.wrong { border-left-color: #c0392b; }
.tv-reply.judge { border-left-color: #6c4bb4; }
.tv-reply h4 { margin: 0.2em 0; font-size: 1em; }
.tv-reply .tv-text { max-height: 9em; }
.tv-meta { color: #555; font-size: 0.88em; }
.tv-paragraphs { list-style: none; padding: 0; counter-reset: none; }
.tv-paragraph { border: 1px solid #ddd; margin: 0.4em 0; padding: 0.3em 0.6em; }
.tv-paragraph.label-error { border: 2px solid #c0392b; }
.tv-paragraph.critic-error { background: #fff4d6; }
.tv-mark { display: inline-block; font-size: 0.8em; padding: 0 0.4em; margin-left: 0.5em; border-radius: 3px; }
.tv-mark.label { background: #c0392b; color: #fff; }
.tv-mark.critic { background: #e0a800; color: #000; }
.tv-ok { color: #2a8a3e; font-weight: 600; }
.tv-bad { color: #c0392b; font-weight: 600; }
`;
  document.head.appendChild(el("style", {}, STYLE));

  // ---- small pieces shared by the views ----

  function number(route, at) {
    const value = route.parts[at];
    if (value === undefined || !/^[0-9]+$/.test(value)) {
      throw new Error(`route #/${route.view}/${route.parts.join("/")}: part ${at + 1} is not a number`);
    }
    return value;
  }

  function facts(pairs) {
    return el("dl", { class: "tv-facts" },
      pairs.filter((pair) => pair !== null).map(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
  }

  function verdict(correct) {
    return el("span", { class: correct ? "tv-ok" : "tv-bad" }, correct ? "right" : "wrong");
  }

  function text(value) {
    return el("pre", { class: "tv-text" }, value === null || value === undefined ? "" : String(value));
  }

  function dollars(value) {
    return value === null || value === undefined ? "—" : "$" + TV.fmt(value, 6);
  }

  // The banner (simulated output), the way back (sections, then `up`: [hash, text] or null) and the title.
  function header(title, simulated, up) {
    const crumbs = [TV.link("#/", "sections"), up ? [" › ", TV.link(up[0], up[1])] : null, ` › ${title}`];
    return [TV.banner(simulated), el("div", { class: "tv-crumbs" }, crumbs), el("h1", {}, title)];
  }

  function orNone(value) {
    return value === null || value === undefined ? "none" : String(value);
  }

  // ---- debate ----

  TV.views.debate = async (route, main) => {
    const n = number(route, 0);
    if (route.parts[1] === "p") {
      return debateProblem(main, n, number(route, 2));
    }
    const data = await TV.need(`debate${n}/index`);
    TV.fill(main, ...header(`Debate: ${data.dataset}`, data.simulated, null),
      facts([["agents", `${data.agents} (${data.model})`], ["judge", data.judge_model],
        ["rounds", String(data.rounds)], ["importance", data.importance ? "rated" : "off"],
        ["right", `${data.correct} of ${data.problems.length}`], ["dollars", dollars(data.usd)]]),
      TV.table({
        columns: [
          { key: "i", label: "#", kind: "number" }, { key: "id", label: "problem", kind: "text" },
          { key: "gold", label: "gold", kind: "number" },
          { key: "final_answer", label: "final answer", kind: "number" },
          { key: "correct", label: "right", kind: "bool" },
          { key: "stop", label: "ended at", kind: "text", title: "round0, round1, ranking, round2, or rounds" },
          { key: "calls", label: "calls", kind: "number" },
          { key: "completion_tokens", label: "completion tokens", kind: "number" },
          { key: "usd", label: "$", kind: "number", digits: 6 },
        ],
        rows: data.problems,
        filters: [
          { id: "wrong", label: "wrong", test: (row) => !row.correct },
          { id: "round2", label: "reached round 2", test: (row) => row.stop === "round2" },
        ],
        rowLink: (row) => `#/debate/${n}/p/${row.i}`,
      }));
  };

  async function debateProblem(main, n, i) {
    const data = await TV.need(`debate${n}/p${i}`);
    TV.fill(main, ...header(`Debate on ${data.problem_id}`, data.simulated, [`#/debate/${n}`, "debates"]),
      text(data.problem),
      facts([["gold", String(data.gold)], ["final answer", orNone(data.final_answer)],
        ["verdict", verdict(data.correct)], ["ended at", data.stop],
        ["voted from", data.deciders.map((a) => `agent ${a}`).join(", ")],
        ["calls", String(data.calls)],
        ["tokens", `${data.prompt_tokens} prompt (${data.cached_prompt_tokens} cached), ` +
          `${data.completion_tokens} completion`],
        ["dollars", dollars(data.usd)],
        data.importance ? ["importance", data.importance.map((v, a) => `agent ${a + 1}: ${TV.fmt(v, 3)}`)
          .join("; ")] : null]));
    const rounds = new Map();
    for (const reply of data.replies) {
      if (!rounds.has(reply.round)) rounds.set(reply.round, []);
      rounds.get(reply.round).push(reply);
    }
    for (const [round, replies] of rounds) {
      const section = el("section", { class: "tv-round", "data-round": String(round) },
        el("h3", {}, `Round ${round}`), replies.map((reply) => debateReply(reply, data.gold)));
      TV.fill(main, section);
      if (round === 1 && data.judge) TV.fill(main, judgeReply(data.judge));
    }
  }

  function debateReply(reply, gold) {
    const right = reply.answer !== null && reply.answer === gold;
    const ratings = reply.rated.length
      ? reply.rated.map((agent, k) => `agent ${agent}: ${TV.fmt(reply.weights[k], 3)}`).join(", ") +
        (reply.rating_fallback ? " (unparsable: uniform)" : "")
      : null;
    return el("article", { class: `tv-reply ${right ? "right" : "wrong"}`, "data-key": reply.key },
      el("h4", {}, `Agent ${reply.agent}: answer ${orNone(reply.answer)}`),
      el("div", { class: "tv-meta" },
        `${reply.prompt_tokens} prompt + ${reply.completion_tokens} completion tokens, ${dollars(reply.usd)}, ` +
        `finish ${reply.finish_reason}`,
        ratings ? ` · rated ${ratings}` : null,
        reply.importance !== null ? ` · importance ${TV.fmt(reply.importance, 3)}` : null),
      text(reply.text));
  }

  function judgeReply(judge) {
    const picks = judge.picks.map((a) => `agent ${a}`).join(" then ");
    return el("section", { class: "tv-round", "data-round": "judge" }, el("h3", {}, "Judge's ranking"),
      el("article", { class: "tv-reply judge", "data-key": judge.key },
        el("h4", {}, `Picks ${picks}${judge.fallback ? " (unparsable: the first two)" : ""}`),
        el("div", { class: "tv-meta" }, `${judge.prompt_tokens} prompt + ${judge.completion_tokens} completion ` +
          `tokens, ${dollars(judge.usd)}`),
        text(judge.text)));
  }

  // ---- critique ----

  TV.views.critique = async (route, main) => {
    const n = number(route, 0);
    if (route.parts[1] === "s") {
      return critiqueSolution(main, n, number(route, 2));
    }
    const data = await TV.need(`critique${n}/index`);
    const s = data.scores;
    TV.fill(main, ...header(`Critique: ${data.dataset}`, data.simulated, null),
      facts([["critic", data.model], ["critiques per solution", String(data.n_votes)],
        ["error accuracy", `${TV.fmt(s.error_accuracy_pct, 2)}%`],
        ["correct accuracy", `${TV.fmt(s.correct_accuracy_pct, 2)}%`], ["F1", `${TV.fmt(s.f1_pct, 2)}%`]]),
      TV.table({
        columns: [
          { key: "i", label: "#", kind: "number" }, { key: "id", label: "solution", kind: "text" },
          { key: "task", label: "task", kind: "text" }, { key: "n_steps", label: "paragraphs", kind: "number" },
          { key: "label", label: "label", kind: "number", title: "first wrong paragraph, -1: none" },
          { key: "prediction", label: "vote", kind: "number", title: "the critics' majority" },
          { key: "match", label: "match", kind: "bool" }, { key: "unanimous", label: "unanimous", kind: "bool" },
          { key: "unparsable", label: "unparsable", kind: "number" },
        ],
        rows: data.solutions,
        filters: [
          { id: "mismatch", label: "vote differs from label", test: (row) => !row.match },
          { id: "split", label: "critics disagree", test: (row) => !row.unanimous },
        ],
        rowLink: (row) => `#/critique/${n}/s/${row.i}`,
      }));
  };

  async function critiqueSolution(main, n, i) {
    const data = await TV.need(`critique${n}/s${i}`);
    TV.fill(main, ...header(`Critique of ${data.id}`, data.simulated, [`#/critique/${n}`, "solutions"]),
      facts([["task", data.task], ["label's first error", paragraphName(data.label)],
        ["critics' first error", data.prediction === null ? "no parsable vote" : paragraphName(data.prediction)],
        ["verdict", data.match ? el("span", { class: "tv-ok" }, "match") : el("span", { class: "tv-bad" },
          "mismatch")],
        ["votes", data.critiques.map((c) => orNone(c.vote)).join(", ")],
        ["tokens", `${data.prompt_tokens} prompt, ${data.completion_tokens} completion`],
        ["dollars", dollars(data.usd)]]),
      el("h3", {}, "Problem"), text(data.problem), el("h3", {}, "Paragraphs"),
      el("ol", { class: "tv-paragraphs" }, data.paragraphs.map((paragraph, k) => {
        const classes = ["tv-paragraph", k === data.label ? "label-error" : null,
          k === data.prediction ? "critic-error" : null].filter(Boolean).join(" ");
        return el("li", { class: classes, "data-paragraph": String(k) },
          el("div", { class: "tv-meta" }, `paragraph ${k}`,
            k === data.label ? el("span", { class: "tv-mark label" }, "label: first error") : null,
            k === data.prediction ? el("span", { class: "tv-mark critic" }, "critics: first error") : null),
          text(paragraph));
      })),
      el("h3", {}, "Critiques"),
      el("div", {}, data.critiques.map((critique, k) => el("details", { class: "tv-critique" },
        el("summary", {}, `critique ${k + 1}: boxed ${critique.boxed === null ? "nothing" : critique.boxed}, ` +
          `vote ${orNone(critique.vote)} (${critique.completion_tokens} tokens, finish ${critique.finish_reason})`),
        text(critique.text)))));
  }

  function paragraphName(index) {
    return index === -1 ? "none (every paragraph right)" : `paragraph ${index}`;
  }

  // ---- grading ----

  TV.views.grading = async (route, main) => {
    const n = number(route, 0);
    if (route.parts[1] === "i") {
      return gradingItem(main, n, number(route, 2));
    }
    const data = await TV.need(`grading${n}/index`);
    const r = data.record;
    // a pool run's row opens its trace in the pool's section (#/pool/<N>/p/<i>/t/<sample id>), unless the critic
    // read it: then its page here shows the critic's reply
    const pool = data.pool === null ? null : await TV.need(`pool${data.pool}/index`);
    const problemNumber = new Map(pool ? pool.problems.map((problem) => [problem.id, problem.i]) : []);
    const itemLink = (row) => {
      if (row.page) return `#/grading/${n}/i/${row.j}`;
      return problemNumber.has(row.id) ? `#/pool/${data.pool}/p/${problemNumber.get(row.id)}/t/${row.line}` : null;
    };
    TV.fill(main, ...header(`Grading: ${data.run}`, data.simulated, null),
      facts([["dataset", r.dataset], ["predictions", `${r.predictions_path} (${r.source})`],
        ["accuracy", `${TV.fmt(100 * r.accuracy, 2)}% (${r.correct} of ${r.total})`],
        ["mean words", TV.fmt(r.avg_word_count, 1)],
        ["critic", r.critic_model === null ? "off" : `${r.critic_model}: mean ${TV.fmt(r.critic_score, 2)}`]]),
      TV.table({
        columns: [
          { key: "j", label: "#", kind: "number" }, { key: "id", label: "item", kind: "text" },
          { key: "line", label: "line", kind: "number", title: "its line in the file, or a pool trace's id" },
          { key: "gold", label: "gold", kind: "text" }, { key: "answer", label: "answer", kind: "text" },
          { key: "correct", label: "right", kind: "bool" },
          { key: "method", label: "verdict by", kind: "text", title: "math_verify, string or unjudged" },
          { key: "words", label: "words", kind: "number" },
          { key: "critic_score", label: "critic", kind: "number", digits: 2 },
        ],
        rows: data.items,
        filters: [
          { id: "wrong", label: "wrong", test: (row) => !row.correct },
          { id: "critic", label: "critic scored", test: (row) => row.critic_score !== null },
        ],
        rowLink: itemLink,
      }));
  };

  async function gradingItem(main, n, j) {
    const data = await TV.need(`grading${n}/i${j}`);
    TV.fill(main, ...header(`Grading of ${data.id}`, data.simulated, [`#/grading/${n}`, "items"]),
      facts([["gold", data.gold], ["answer", data.answer],
        ["Math-Verify", [verdict(data.correct), ` (${data.method})`]], ["words", String(data.words)],
        ["critic's score", data.critic_score === null ? "none" : TV.fmt(data.critic_score, 2)]]),
      el("h3", {}, "Problem"), text(data.problem),
      el("h3", {}, "Reasoning"), text(data.thinking), el("h3", {}, "Final part"), text(data.content),
      el("h3", {}, "The critic's reply"),
      data.critic_reply === null ? el("p", {}, "The critic was not asked about this prediction.")
        : text(data.critic_reply));
  }

  // ---- study and compare ----

  TV.views.study = async (route, main) => {
    const n = number(route, 0);
    const data = await TV.need(`study${n}/index`);
    TV.fill(main, ...header(`Study: ${data.dataset}`, data.simulated, null),
      el("ul", {}, data.notes.map((note) => el("li", {}, note))),
      el("p", {}, "Each row opens the problems behind it: a vote's pool, filtered to the problems its method got " +
        "wrong; the debate's transcripts."),
      TV.table({
        columns: [
          { key: "model", label: "model", kind: "text" }, { key: "label", label: "method", kind: "text" },
          { key: "k", label: "K", kind: "number" }, { key: "problems", label: "problems", kind: "number" },
          { key: "accuracy_pct", label: "accuracy (%)", kind: "number", digits: 2 },
          { key: "ci_low_pct", label: "low (%)", kind: "number", digits: 2 },
          { key: "ci_high_pct", label: "high (%)", kind: "number", digits: 2 },
          { key: "tokens_per_problem", label: "tokens / problem", kind: "number", digits: 1 },
          { key: "usd_per_problem", label: "$ / problem", kind: "number", digits: 6 },
          { key: "on_frontier", label: "frontier", kind: "bool" },
        ],
        rows: data.points,
        filters: [{ id: "frontier", label: "on the frontier", test: (row) => row.on_frontier }],
        rowLink: (row) => row.link,
      }));
  };

  TV.views.compare = async (route, main) => {
    const n = number(route, 0);
    const data = await TV.need(`compare${n}/index`);
    TV.fill(main, ...header("Voting beside debate", data.simulated, null),
      el("p", {}, `Datasets: ${data.datasets.join(", ") || "none shared"}.`),
      el("ul", {}, data.links.map((link) => el("li", {}, TV.link(link.hash, link.label)))),
      TV.table({
        columns: [
          { key: "label", label: "method", kind: "text" }, { key: "k", label: "K", kind: "number" },
          { key: "problems", label: "problems", kind: "number" },
          { key: "accuracy_pct", label: "accuracy (%)", kind: "number", digits: 2 },
          { key: "completion_tokens_per_problem", label: "completion tokens / problem", kind: "number", digits: 1 },
        ],
        rows: data.rows,
        rowLink: (row) => row.link,
      }));
  };
})();
