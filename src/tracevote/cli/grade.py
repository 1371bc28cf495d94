"""`python -m tracevote grade`: grade one predictions file against a dataset's gold, as the grading scorer did.

The gold: --gold FILE, or the scorer's layout under --data-root DIR (DIR/test/<dataset>_test.jsonl), else the
project's normalized file of the dataset (aime is aime_2024, as in the original scorer). The critic
(--enable-critic) reads its settings from the params file's grading.critic, calls the model on the ledger under
--critic-dir (durable, resumable, never paid twice; by default the pipeline's folder of the grading run whose
predictions the file is, so both share one ledger, else grading/critic/cli) and shows its progress on stderr.
--limit N grades the file's first N predictions only; --per-item FILE writes one row per item
(tracevote.grading.items).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from tracevote.core.config import Params, load_params
from tracevote.core.config_methods import GradingRunConfig
from tracevote.core.errors import ConfigError, DataError
from tracevote.grading.accuracy import check_some_match
from tracevote.grading.gold import GoldItem, GradingFormat, format_keys, gold_from_normalized, read_gold_file
from tracevote.grading.items import Limited, first_items, item_rows, row_format, write_item_rows
from tracevote.grading.predictions import of_dataset, read_predictions
from tracevote.grading.runs import RunInputs, grade_inputs, run_record
from tracevote.grading.summary import json_summary, render_run

if TYPE_CHECKING:  # the critic's modules load pyarrow, numpy and requests: imported only when it runs
    from tracevote.grading.critic import CriticScores

CLI_CRITIC_DIR = "grading/critic/cli"  # the command line's own critic ledgers
PIPELINE_CRITIC_DIR = "grading/critic/{run}"  # dvc.yaml's build_grading_critic output, a run's critic folder
PROJECT_DATASET = {"gsm8k": "gsm8k", "math500": "math500", "aime": "aime_2024", "amc23": "amc23"}
# the scorer's --data-root layout: <root>/test/<stem>.jsonl; the names are fixed (--dataset's choices)
DATA_ROOT_STEMS: dict[GradingFormat, str] = {"gsm8k": "gsm8k_test", "math500": "math500_test", "aime": "aime_test",
                                             "amc23": "amc23_test"}


def run_grade(args: argparse.Namespace) -> int:
    if args.per_item is not None:
        row_format(args.per_item)  # a bad extension is refused before anything is graded or paid
    params = _params(args)
    structured = params is not None and args.enable_critic and _structured(args, params)
    inputs, limited = _inputs(args)
    # only input nothing refused loads Math-Verify (~0.45 CPU s of imports): a typo fails fast. The critic comes
    # after, so that no thread of its (tqdm's monitor) is alive when the judge forks its workers.
    grades = grade_inputs(inputs, None if params is None else params.grading)
    critic, critic_simulated = (None, False)
    if params is not None and args.enable_critic:
        critic, critic_simulated = _critic(args, params, inputs, structured)
    run = GradingRunConfig(name="cli", dataset=args.dataset, predictions=str(args.pred_path), id_key=args.id_key)
    critic_model = None if params is None else params.critic_model.name
    record = run_record(run, inputs, grades, critic, critic_simulated, critic_model)
    if args.per_item is not None:
        write_item_rows(args.per_item, item_rows(inputs.gold, inputs.pairing(), grades, critic,
                                                        critic_simulated=critic_simulated))
    if args.json:
        limits = None if limited is None else dataclasses.asdict(limited)
        print(orjson.dumps({**json_summary(record), "limited": limits}).decode())
    else:
        print(render_run(record, critic_enabled=args.enable_critic, notes=[] if limited is None else [limited.note()]))
    return 0


def _inputs(args: argparse.Namespace) -> tuple[RunInputs, Limited | None]:
    """The gold and the file's predictions of the dataset; with --limit N, the first N predictions and their gold."""
    gold = _gold(args)
    predictions = of_dataset(read_predictions(args.pred_path), [args.dataset], str(args.pred_path))
    check_some_match(gold, predictions, source=str(args.pred_path))
    limited = None
    if args.limit is not None:
        gold, predictions, limited = first_items(gold, predictions, args.limit)
    return RunInputs(gold, predictions, "predictions file", False), limited


def _params(args: argparse.Namespace) -> Params | None:
    """The params file's settings; without one (grading a file outside a project) the defaults, unless the
    critic needs its model."""
    if not Path(args.params).is_file() and not args.enable_critic:
        return None
    params = load_params(args.params)
    critic = params.grading.critic
    if args.enable_critic:
        critic = dataclasses.replace(critic, enabled=True, max_samples=args.critic_max_samples or critic.max_samples)
        critic.validate("--critic-max-samples")
    return dataclasses.replace(params, grading=dataclasses.replace(params.grading, critic=critic))


def _gold(args: argparse.Namespace) -> list[GoldItem]:
    """From --gold, from the scorer's layout under --data-root, else the project's normalized file."""
    path = args.gold if args.data_root is None else data_root_gold(args.data_root, args.dataset)
    if path is None:
        path = Path("data") / f"{PROJECT_DATASET[args.dataset]}.jsonl"
        return gold_from_normalized(path, prefix=args.dataset, id_key=args.id_key)
    keys = format_keys(args.dataset, problem=args.problem_key, answer=args.answer_key,
                       reference=args.solution_key, id_key=args.id_key)
    return read_gold_file(path, keys, prefix=args.dataset)


def data_root_gold(data_root: Path, dataset: GradingFormat) -> Path:
    """The scorer's gold file of `dataset` under `data_root`: data/ + aime -> data/test/aime_test.jsonl;
    DataError naming the path when it is not there."""
    path = data_root / "test" / f"{DATA_ROOT_STEMS[dataset]}.jsonl"
    if not path.is_file():
        raise DataError(f"{path}: gold file not found (--data-root {data_root} --dataset {dataset} reads "
                        f"<data-root>/test/{DATA_ROOT_STEMS[dataset]}.jsonl; --gold FILE names any other file)")
    return path


def _structured(args: argparse.Namespace, params: Params) -> bool:
    """Structured critic replies where the endpoint's profile has them; --critic-structured where it has not is
    refused before anything is written or sent."""
    from tracevote.grading.critic import structured_replies

    structured = structured_replies(params)
    if args.critic_structured and not structured:
        model = params.critic_model
        raise ConfigError(f"--critic-structured: the critic's endpoint {model.endpoint} ({model.name}, profile "
                          f"{model.profile.name}) has no json_schema replies; name one that has in "
                          f"grading.critic.endpoint, or leave the flag out")
    return structured


def critic_folder(critic_dir: Path | None, pred_path: Path, params: Params) -> tuple[Path, str | None]:
    """Where the critic's ledger is, and the grading run it is shared with: --critic-dir when given; else the
    pipeline's folder of the run of grading.runs whose predictions are this file, so the command line and the
    pipeline keep one ledger (same path, same keys: an item either paid for is never paid again); else the command
    line's own folder."""
    if critic_dir is not None:
        return critic_dir, None
    for run in params.grading.runs.values():
        if Path(run.predictions).resolve() == pred_path.resolve():
            return Path(PIPELINE_CRITIC_DIR.format(run=run.name)), run.name
    return Path(CLI_CRITIC_DIR), None


def _critic(args: argparse.Namespace, params: Params, inputs: RunInputs,
            structured: bool) -> tuple[CriticScores | None, bool]:
    from tracevote.grading.build import build_critic
    from tracevote.grading.stored import ledger_scores, stored_critic_scores

    pairing = inputs.pairing()
    critic_dir, shared_with = critic_folder(args.critic_dir, args.pred_path, params)
    critic_dir.mkdir(parents=True, exist_ok=True)
    # stdout holds only the scorer's lines (or the one JSON object): the critic's own lines go to stderr
    with contextlib.redirect_stdout(sys.stderr):
        if shared_with is not None:
            print(f"grade --enable-critic: {args.pred_path} is grading run {shared_with}'s predictions: the critic "
                  f"shares that run's ledger in {critic_dir} (--critic-dir names another folder)")
        build_critic(params, "cli", pairing, critic_dir, stage="grade --enable-critic", structured=structured,
                     record_manifest=shared_with is None)
    if shared_with is not None:
        return ledger_scores(params, pairing, critic_dir, structured=structured)
    return stored_critic_scores(params, pairing, critic_dir, structured=structured)
