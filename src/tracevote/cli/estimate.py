"""`python -m tracevote estimate`: what the work still missing would cost, one row per paid stage and dataset.

Each row reads the stage's ledger (a pool, a debate, critique or critic ledger) as the stage itself would and
prices only the requests it would still send, with the estimate the stage checks against its max_cost_usd: a
finished pool costs $0. A dataset whose normalized file is not there yet is named with the command that makes
it, and left out of the total. In a scratch project of two toy problems on the simulator:

    stage                            requests    tokens in    tokens out    dollars  note
    -----------------------------  ----------  -----------  ------------  ---------  ----------------------------
    build_pool@toy                          4          178           256  $0.000097
    build_debate@toy                       22       166.8k         67.6k    $0.0423  at most (no early consensus)
    build_critiques@toy_steps               ?            ?             ?          ?  needs dvc repro normalize@...
    build_grading_critic@pool_toy           0            0             0         $0  grading.critic.enabled: false
    -----------------------------  ----------  -----------  ------------  ---------  ----------------------------
    total                                  26       167.0k         67.8k    $0.0424  without the rows marked ?

then each endpoint's prices once, and a SIMULATED note when the backend is the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from tabulate import SEPARATING_LINE, tabulate

from tracevote.core.config import Params
from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.config_methods import GradingRunConfig
from tracevote.core.costs import BYTES_PER_PROMPT_TOKEN, CostEstimate, estimate, money, simulated_as
from tracevote.store.calls import CallLedger

if TYPE_CHECKING:  # the grading modules load only where a row needs them
    from tracevote.grading.gold import GoldItem

T = TypeVar("T")
HEADERS = ("stage", "requests", "tokens in", "tokens out", "dollars", "note")
ALIGN = ("left", "right", "right", "right", "right", "left")
PRICES_HEADING = "prices per 1M tokens (every token in at the cache-miss price, a worst case):"


@dataclass(frozen=True)
class Row:
    """One paid stage of one dataset (or grading run): the requests it still lacks, priced; `cost` None when it
    cannot be priced yet (`note` says what is needed)."""

    stage: str
    cost: CostEstimate | None
    models: tuple[ModelConfig, ...]  # whose prices it is at
    note: str = ""


def estimate_rows(params: Params, n_pool: int) -> list[Row]:
    """Every paid stage's row: the pools (at `n_pool` samples per problem), debates, critiques, then the critic."""
    return [*(pool_row(params, name, n_pool) for name in params.deepconf.datasets),
            *(pool_row(params, name, n_pool, endpoint) for name in params.deepconf.datasets
              for endpoint in params.deepconf.endpoints),
            *(online_row(params, name) for name in params.online.live.datasets),
            *(debate_row(params, name) for name in params.debate.datasets),
            *(critique_row(params, name) for name in params.critique.datasets),
            *(critic_row(params, run) for run in params.grading.runs.values())]


def normalized(name: str, load: Callable[[Path], list[T]]) -> list[T] | None:
    """The dataset's normalized records, or None when `dvc repro normalize@<name>` has not made them yet."""
    path = Path("data") / f"{name}.jsonl"  # a checked name: core.config.DATASET_NAME
    return load(path) if path.is_file() else None


def _not_normalized(stage: str, name: str) -> Row:
    return Row(stage, None, (), f"needs dvc repro normalize@{name}")


def _capped(stage: str, cost: CostEstimate, models: tuple[ModelConfig, ...], cap_usd: float, cap: str,
            note: str = "") -> Row:
    """The row, noting when nothing is missing, or when the stage would refuse for its cap."""
    if not cost.requests:
        return Row(stage, cost, models, "nothing missing")
    over = f"over {cap} {money(cap_usd)}" if cost.usd > cap_usd else ""  # the stage refuses to start
    return Row(stage, cost, models, "; ".join(part for part in (note, over) if part))


def pool_row(params: Params, name: str, n_pool: int, endpoint: str | None = None) -> Row:
    """build_pool@<name>: the samples below `n_pool` the dataset's pool (of this setting) lacks; with `endpoint`
    (one of deepconf.endpoints), build_pool_model@<name>-<endpoint>'s, at that endpoint's prices."""
    from tracevote.core.costs import prompt_bytes
    from tracevote.core.study_paths import POOL_STAGE, model_paths, model_stage
    from tracevote.datasets.problems import load_problems
    from tracevote.sampling.build import plan_build
    from tracevote.sampling.prompts import setting_messages
    from tracevote.store.pool import Setting, find_pool

    stage = f"build_pool@{name}" if endpoint is None else model_stage(POOL_STAGE, name, endpoint)
    problems = normalized(name, load_problems)
    if problems is None:
        return _not_normalized(stage, name)
    model = params.deepconf_model if endpoint is None else params.study_model(endpoint)
    setting = Setting.from_params(params, model)
    folder = Path("pools") / name if endpoint is None else model_paths(endpoint, name, params.deepconf.endpoint).pools
    pool = find_pool(folder, setting)
    if pool is None:
        sizes = [prompt_bytes(messages) for messages in setting_messages(problems, setting).values()]
        cost = estimate(sizes * n_pool, setting.max_tokens, model.priced(), simulated_as=simulated_as(model))
    else:
        cost = plan_build(pool, problems, setting, n_pool, model.priced(), simulated_as=simulated_as(model)).cost
    return _capped(stage, cost, (model,), params.pool.max_cost_usd, "pool.max_cost_usd")


def online_row(params: Params, name: str) -> Row:
    """build_online@<name>: the traces its ledgers lack, each as long as decoding.max_tokens (no trace stopping
    early, no consensus stop: the worst case the stage checks against online.live.max_cost_usd)."""
    import dataclasses

    from tracevote.datasets.problems import load_problems
    from tracevote.sampling import live, live_rules
    from tracevote.sampling.prompts import setting_messages
    from tracevote.store.live import LiveLedger, ledger_root
    from tracevote.store.pool import Setting

    stage = f"build_online@{name}"
    problems = normalized(name, load_problems)
    if problems is None:
        return _not_normalized(stage, name)
    model, rules = params.deepconf_model, live_rules.live_rules(params)
    folder, simulated = Path("online") / name, model.backend == "sim"
    roots = {part: ledger_root(folder, part, setting, simulated=simulated)
             for part, setting in live_rules.ledger_settings(params, rules).items()}
    rules = dataclasses.replace(rules, consensus=None)  # the worst case: no consensus stop
    ledgers = {part: LiveLedger(root) for part, root in roots.items() if (root / LiveLedger.META).is_file()}
    warmup = ledgers.pop(live_rules.WARMUP, None)
    ids = [problem.id for problem in problems]
    missing = len(ids) * (rules.warmup + len(rules.percentiles) * (rules.budget - rules.warmup))
    if warmup is not None and len(ledgers) == len(rules.percentiles):
        missing = live.missing_traces(warmup, ledgers, ids, rules, _no_answers)
    messages = setting_messages(problems, Setting.from_params(params))
    cost = live.worst_case(messages, missing, rules.max_tokens, model)
    return _capped(stage, cost, (model,), params.online.live.max_cost_usd, "online.live.max_cost_usd",
                   "at most (no trace stopping early)")


def _no_answers(problem_id: str, traces: list) -> np.ndarray:
    """Answer codes for a count that never checks consensus: none are read."""
    return np.full(len(traces), -1, dtype=np.int64)


def debate_row(params: Params, name: str) -> Row:
    """build_debate@<name>: every call the unfinished debates may still make (none agreeing early)."""
    from tracevote.datasets.problems import load_problems
    from tracevote.debate import build

    stage = f"build_debate@{name}"
    problems = normalized(name, load_problems)
    if problems is None:
        return _not_normalized(stage, name)
    selection = build.select_problems(problems, params.debate.problems, name)
    debates = build.debates_for([problems[position] for position in selection.positions], params)
    model, judge = params.debate_model, params.judge_model
    root = build.ledger_root(Path("debates") / name, params)
    if (root / CallLedger.META).is_file():
        cost = build.plan_debates(CallLedger(root), debates, model.priced(), judge_pricing=judge.priced(),
                                  simulated_as=simulated_as(model)).cost
    else:
        cost = build.worst_case_cost(debates, model.priced(), judge_pricing=judge.priced(),
                                     simulated_as=simulated_as(model))
    return _capped(stage, cost, (model, judge), params.debate.max_cost_usd, "debate.max_cost_usd",
                   "at most (no early consensus)")


def critique_row(params: Params, name: str) -> Row:
    """build_critiques@<name>: the critiques (critique.n_votes per solution) its ledger lacks."""
    from tracevote.critique import build
    from tracevote.datasets.steps import load_step_records

    stage = f"build_critiques@{name}"
    records = normalized(name, load_step_records)
    if records is None:
        return _not_normalized(stage, name)
    cfg, model = params.critique, params.critique_model
    template = build.dataset_template(params, name)
    root = build.ledger_root(Path("critiques") / name, params, name)
    if (root / CallLedger.META).is_file():
        cost = build.plan_critiques(CallLedger(root), build.critique_calls(records, template, cfg.n_votes),
                                    model.priced(), cfg.max_tokens, simulated_as=simulated_as(model)).cost
    else:
        cost = build.critiques_cost(records, template, cfg, model.priced(), simulated_as=simulated_as(model))
    return _capped(stage, cost, (model,), cfg.max_cost_usd, "critique.max_cost_usd")


def critic_row(params: Params, run: GradingRunConfig) -> Row:
    """build_grading_critic@<run>: the critic replies its ledger lacks; before a pool's traces exist, each at
    the length the pool's estimate expects."""

    stage = f"build_grading_critic@{run.name}"
    cfg, models = params.grading.critic, (params.critic_model,)
    if not cfg.enabled:
        return Row(stage, estimate([], 1, models[0].priced()), (), "grading.critic.enabled: false")
    gold = Path("data") / f"{run.dataset}.jsonl"  # a checked name: core.config.DATASET_NAME
    if not gold.is_file():
        return _not_normalized(stage, run.dataset)
    references = _with_references(gold, run.dataset)
    if not references:
        return Row(stage, estimate([], 1, models[0].priced()), (),
                   f"{run.dataset} has no reference solutions: nothing for the critic to ask")
    if Path(run.predictions).is_file():
        return _capped(stage, _critic_missing(params, run, gold), models, cfg.max_cost_usd,
                       "grading.critic.max_cost_usd")
    if Path(run.predictions).suffix != ".json":
        return Row(stage, None, (), f"needs {run.predictions} (dvc pull)")
    return _capped(stage, _critic_before_pool(params, references), models, cfg.max_cost_usd,
                   "grading.critic.max_cost_usd", "pool's traces at expected length")


def _with_references(gold: Path, dataset: str) -> list[GoldItem]:
    """The gold items that have a reference solution, in file order: the only ones the critic is asked about."""
    from tracevote.grading.gold import gold_from_normalized

    return [item for item in gold_from_normalized(gold, prefix=dataset, project_ids=True) if item.reference is not None]


def _critic_missing(params: Params, run: GradingRunConfig, gold: Path) -> CostEstimate:
    from tracevote.grading.critic import (
        calls_cost,
        critic_calls,
        critic_items,
        ledger_root,
        missing_calls,
        structured_replies,
    )
    from tracevote.grading.runs import run_inputs

    structured = structured_replies(params)
    items = critic_items(run_inputs(run, gold, params.answers).pairing(), params.grading.critic.max_samples)
    root = ledger_root(Path("grading") / "critic" / run.name, params, structured=structured)
    exists = (root / CallLedger.META).is_file()
    calls = missing_calls(CallLedger(root), items, structured=structured) if exists else \
        critic_calls(items, structured=structured)
    return calls_cost(calls, params)


def _critic_before_pool(params: Params, references: list[GoldItem]) -> CostEstimate:
    """The critic's calls on a pool not built yet: the first max_samples gold items with a reference solution,
    each shown a trace of max_tokens x the pool endpoint's expected_output_fraction (as the debate's estimate
    sizes a solution it has not seen)."""
    from tracevote.critique.critic_prompt import critic_messages

    cfg, model = params.grading.critic, params.critic_model
    items = references[:cfg.max_samples]
    trace = math.ceil(params.decoding.max_tokens * params.deepconf_model.priced().expected_output_fraction
                      * BYTES_PER_PROMPT_TOKEN)
    sizes = [len(critic_messages(item.problem, item.reference or "", "")[0]["content"].encode()) + trace
             for item in items]
    return estimate(sizes, cfg.max_tokens, model.priced(), simulated_as=simulated_as(model))


def render(rows: Sequence[Row]) -> str:
    """The table, a total row, then each endpoint's prices once (and the SIMULATED note when it applies)."""
    priced = [row.cost for row in rows if row.cost is not None]
    total = CostEstimate(sum(c.requests for c in priced), sum(c.input_tokens for c in priced),
                         sum(c.output_tokens for c in priced), sum(c.usd for c in priced), "")
    unpriced = "without the rows marked ?" if len(priced) < len(rows) else ""
    table = [*(_cells(row.stage, row.cost, row.note) for row in rows), SEPARATING_LINE,
             _cells("total", total, unpriced)]
    lines = ["What the work still missing would cost (each pool and ledger read; finished work costs $0):", "",
             tabulate(table, headers=HEADERS, tablefmt="simple", colalign=ALIGN, disable_numparse=True), ""]
    models = list({model.endpoint: model for row in rows for model in row.models}.values())
    if models:
        lines += [PRICES_HEADING, *(_prices(model) for model in models)]
    if any(model.backend == "sim" for model in models):
        lines.append("SIMULATED (model.backend: sim): the dollars are what the named models would cost at list "
                     "prices; nothing will be spent")
    return "\n".join(lines)


def _cells(stage: str, cost: CostEstimate | None, note: str) -> list[str]:
    if cost is None:
        return [stage, "?", "?", "?", "?", note]
    return [stage, f"{cost.requests:,}", tokens(cost.input_tokens), tokens(cost.output_tokens), money(cost.usd),
            note]


def tokens(count: int) -> str:
    """A token count at a glance: 950 -> "950", 12_345 -> "12.3k", 2_963_000 -> "2.96M", 1_996_800_000 ->
    "2.00B" (the paper's gpt-oss pool: 15,360 traces of up to 130,000 tokens)."""
    if count < 1_000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1e3:.1f}k"
    if count < 1_000_000_000:
        return f"{count / 1e6:.2f}M"
    return f"{count / 1e9:.2f}B"


def _prices(model: ModelConfig) -> str:
    """"  deepseek-v4-flash (endpoint deepseek): $0.14 in, $0.28 out, checked 2026-07; out at 100% of max_tokens"."""
    prices = model.priced()
    return (f"  {model.name} (endpoint {model.endpoint}): ${prices.input_cache_miss:g} in, ${prices.output:g} out, "
            f"checked {prices.checked}; out at {prices.expected_output_fraction:.0%} of max_tokens")
