"""`python -m tracevote estimate`'s second table: each paid stage's largest request against its endpoint's context
window, as the stage itself checks it before paying (core.context_fit). In a scratch project on the simulator:

    stage             endpoint    largest prompt              prompt + max_tokens     window  fits
    ----------------  ----------  -----------------------  ----------------------  ---------  ------
    build_pool@toy    deepseek    toy-01 (solve prompt)          at most 165 + 64  1,048,576  yes
    build_debate@toy  deepseek    toy-01 (debate round 1)  at most 15,455 + 3,072  1,048,576  yes
    build_debate@toy  deepseek    toy-01 (debate ranking)  at most 15,185 + 3,072  1,048,576  yes

A row whose request cannot fit says which max_tokens would ("no: max_tokens <= 1,270"); an unknown window says
"unchecked". Datasets not normalized yet are left out (the cost table above names them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from tracevote.cli.estimate import normalized
from tracevote.core.config import Params
from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.context_fit import SOLVE_PROMPT, Fit, Prompt, assess, prompts_of

HEADERS = ("stage", "endpoint", "largest prompt", "prompt + max_tokens", "window", "fits")
ALIGN = ("left", "left", "left", "right", "right", "left")


@dataclass(frozen=True)
class ContextRow:
    stage: str
    fit: Fit


def context_rows(params: Params) -> list[ContextRow]:
    """Every paid stage's largest request on each endpoint it calls, where its inputs are there to count."""
    rows: list[ContextRow] = []
    for name in params.deepconf.datasets:
        rows += _pool_rows(params, name)
    for name in params.debate.datasets:
        rows += _debate_rows(params, name)
    for name in params.critique.datasets:
        rows += _critique_rows(params, name)
    for run in params.grading.runs.values():
        rows += _critic_rows(params, run.name, run.dataset)
    return rows


def _row(stage: str, model: ModelConfig, prompts: list[Prompt], max_tokens: int) -> list[ContextRow]:
    fit = assess(model, prompts, max_tokens)
    return [] if fit is None else [ContextRow(stage, fit)]


def _pool_rows(params: Params, name: str) -> list[ContextRow]:
    """build_pool (and build_online, on the same prompts and max_tokens) and each study model's pool."""
    from tracevote.core.study_paths import POOL_STAGE, model_stage
    from tracevote.datasets.problems import load_problems
    from tracevote.sampling.prompts import setting_messages
    from tracevote.store.pool import Setting

    problems = normalized(name, load_problems)
    if problems is None:
        return []
    rows = []
    for endpoint in (None, *params.deepconf.endpoints):
        model = params.deepconf_model if endpoint is None else params.study_model(endpoint)
        messages = setting_messages(problems, Setting.from_params(params, model))
        stage = f"build_pool@{name}" if endpoint is None else model_stage(POOL_STAGE, name, endpoint)
        rows += _row(stage, model, prompts_of(messages.items(), SOLVE_PROMPT),
                     params.decoding.max_tokens)
    return rows


def _debate_rows(params: Params, name: str) -> list[ContextRow]:
    from tracevote.datasets.problems import load_problems
    from tracevote.debate import build
    from tracevote.debate.context import agent_prompts, judge_prompts

    problems = normalized(name, load_problems)
    if problems is None:
        return []
    selection = build.select_problems(problems, params.debate.problems, name)
    debates = build.debates_for([problems[position] for position in selection.positions], params)
    stage, max_tokens = f"build_debate@{name}", params.debate.max_tokens
    return (_row(stage, params.debate_model, [p for d in debates for p in agent_prompts(d)], max_tokens)
            + _row(stage, params.judge_model, [p for d in debates for p in judge_prompts(d)], max_tokens))


def _critique_rows(params: Params, name: str) -> list[ContextRow]:
    from tracevote.critique import build
    from tracevote.datasets.steps import load_step_records

    records = normalized(name, load_step_records)
    if records is None:
        return []
    calls = build.critique_calls(records, build.dataset_template(params, name), 1)  # every vote has one prompt
    return _row(f"build_critiques@{name}", params.critique_model,
                prompts_of(((call.item_id, call.messages) for call in calls), "critique"), params.critique.max_tokens)


def _critic_rows(params: Params, run_name: str, dataset: str) -> list[ContextRow]:
    """The critic's prompts hold the run's predictions: counted once they are there."""
    from tracevote.grading.critic import critic_items
    from tracevote.grading.runs import run_inputs

    run, gold = params.grading.runs[run_name], Path("data") / f"{dataset}.jsonl"
    if not params.grading.critic.enabled or not gold.is_file() or not Path(run.predictions).is_file():
        return []
    items = critic_items(run_inputs(run, gold, params.answers).pairing(), params.grading.critic.max_samples)
    prompts = prompts_of(((item.item_id, item.messages) for item in items), "critic call")
    return _row(f"build_grading_critic@{run_name}", params.critic_model, prompts, params.grading.critic.max_tokens)


def render_context(rows: list[ContextRow]) -> str:
    """The table under its heading; empty when no stage's inputs are there yet."""
    if not rows:
        return ""
    table = [_cells(row) for row in rows]
    return "\n".join(["Each paid stage's largest request against its endpoint's context window (checked before "
                      "paying):", "", tabulate(table, headers=HEADERS, tablefmt="simple", colalign=ALIGN,
                                                disable_numparse=True)])


def _cells(row: ContextRow) -> list[str]:
    fit = row.fit
    need = fit.largest
    request = f"{'' if need.exact else 'at most '}{need.tokens(fit.max_tokens):,} + {fit.max_tokens:,}"
    window = f"{fit.window.tokens:,}" if fit.window else "unknown"
    verdict = "unchecked" if fit.window is None else "yes" if fit.fits else _no(fit)
    return [row.stage, fit.endpoint, f"{need.prompt.item_id} ({need.prompt.what})", request, window, verdict]


def _no(fit: Fit) -> str:
    assert fit.window is not None
    fitting = fit.largest.max_tokens_fitting(fit.window.tokens)
    return f"no: max_tokens <= {fitting:,}" if fitting > 0 else "no: the prompt alone is too long"
