"""A grading run: its gold, its predictions (a file, or a pool's traces), and its grades with the critic's.

A pool as predictions: every trace of the pool (up to its manifest's n_pool) is one prediction of its problem,
with the trace's text as `thinking` and ``#### <answer>`` as `content`, the answer being the one the score stage
gives it under `answers:` (a trace with no answer has empty content, so it is wrong).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracevote.answers.mathverify import MathJudge, StartMethod
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_methods import GradingConfig, GradingRunConfig
from tracevote.core.errors import DataError
from tracevote.core.fileio import read_json_record, write_json, write_jsonl
from tracevote.grading.accuracy import Grades, Pairing, check_some_match, grade, pair_by_id
from tracevote.grading.gold import GoldItem, gold_from_normalized
from tracevote.grading.predictions import Prediction, of_dataset, read_predictions

if TYPE_CHECKING:  # the critic's modules and the pool's load pyarrow and numpy: too slow for `grade` on a file
    from tracevote.grading.critic import CriticScores


@dataclass(frozen=True)
class RunInputs:
    gold: list[GoldItem]
    predictions: list[Prediction]
    source: str  # "predictions file" or "pool"
    simulated: bool  # the predictions are a simulated pool's

    def pairing(self) -> Pairing:
        return pair_by_id(self.gold, self.predictions)


def run_inputs(run: GradingRunConfig, gold_path: Path, answers: AnswersConfig) -> RunInputs:
    """The gold of `run.dataset` (its normalized file) and the run's predictions (a pool's name their problems by
    the normalized ids, whatever `run.id_key` says)."""
    path = Path(run.predictions)
    if path.suffix == ".json":
        predictions, simulated = pool_predictions(path, answers)
        gold = gold_from_normalized(gold_path, prefix=run.dataset, project_ids=True)
        return RunInputs(gold, predictions, "pool", simulated)
    gold = gold_from_normalized(gold_path, prefix=run.dataset, id_key=run.id_key)
    predictions = of_dataset(read_predictions(path), [run.dataset], str(path))
    check_some_match(gold, predictions, source=str(path))
    return RunInputs(gold, predictions, "predictions file", False)


def pool_predictions(manifest_path: Path, answers: AnswersConfig) -> tuple[list[Prediction], bool]:
    """Every trace of the pool a manifest names as a prediction of its problem, in sample-id order, and whether it
    is simulated."""
    from tracevote.answers.extract import resolve_answer
    from tracevote.store.pool import pool_texts

    manifest, texts = pool_texts(manifest_path)
    predictions = []
    for problem_id, traces in texts.items():
        for fields in traces:
            answer, _ = resolve_answer(fields.candidates, fields.finish_reason, answers)
            content = "" if answer is None else f"#### {answer}"
            predictions.append(Prediction(problem_id, None, fields.text, content, fields.sample_id))
    if not predictions:
        raise DataError(f"{manifest_path}: the pool {manifest.pool_root(manifest_path)} holds no traces; run "
                        f"build_pool first")
    return predictions, manifest.simulated


DEFAULT_TIMEOUT_S, DEFAULT_WORKERS = 5.0, 2  # grading.verify_timeout_s and grading.workers, without a params file


def grading_start_method() -> StartMethod:
    """Workers forked from this process once it has loaded Math-Verify: no fork server and resource tracker
    interpreters to start (~0.1 CPU-s of the ~0.3 s grade pays over a plain loop); the fork server where fork is
    unavailable. Asked when a judge is made, so a stage that imports this module for a run's config and records
    (the grading critic) never loads multiprocessing."""
    import multiprocessing

    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "forkserver"


def grading_judge(cfg: GradingConfig | None) -> MathJudge:
    """The grading rule's judge with `cfg`'s time limit and workers (the defaults when there is no params file)."""
    timeout_s, workers = (DEFAULT_TIMEOUT_S, DEFAULT_WORKERS) if cfg is None else (cfg.verify_timeout_s, cfg.workers)
    return MathJudge(max_workers=workers, timeout_s=timeout_s, rule="grading", start_method=grading_start_method())


def grade_inputs(inputs: RunInputs, cfg: GradingConfig | None) -> Grades:
    with grading_judge(cfg) as judge:
        return grade(inputs.gold, inputs.predictions, judge)


# ---- the critic's manifest: what build_grading_critic leaves for the grade stage ----

@dataclass(frozen=True)
class CriticManifest:
    """grading/critic/<run>/manifest.json: whether the critic ran, which ledger holds its replies, how many."""

    run: str
    enabled: bool
    ledger: str | None  # relative to the manifest's folder
    fingerprint: str | None
    items: int
    finished: int
    simulated: bool
    max_samples: int


MANIFEST = "manifest.json"


def write_critic_manifest(critic_dir: Path, manifest: CriticManifest) -> None:
    write_json(critic_dir / MANIFEST, asdict(manifest))


def read_critic_manifest(critic_dir: Path) -> CriticManifest:
    return read_json_record(critic_dir / MANIFEST, CriticManifest, what="critic manifest",
                            missing="run build_grading_critic (`dvc repro` does), or `dvc pull` it")


# ---- the grade stage's outputs ----

def run_record(run: GradingRunConfig, inputs: RunInputs, grades: Grades, critic: CriticScores | None,
               critic_simulated: bool, critic_model: str | None = None) -> dict[str, Any]:
    """grading/runs/<run>.json: the run, where its predictions came from, its grades and the critic's (and the
    model behind its scores)."""
    return {
        "run": run.name, "dataset": run.dataset, "predictions_path": run.predictions, "source": inputs.source,
        "simulated": inputs.simulated or (critic is not None and critic_simulated),
        "gold_items": len(inputs.gold),
        **grades.summary(),
        "critic_score": None if critic is None else critic.mean,
        "critic_scored": 0 if critic is None else critic.scored,
        "critic_unparsable": 0 if critic is None else critic.unparsable,
        "critic_context_failed": 0 if critic is None else critic.context_failed,
        "critic_usd": 0.0 if critic is None else critic.usd,
        "critic_model": None if critic is None else critic_model,
    }


def write_run(out: Path, details: Path, record: dict[str, Any], grades: Grades,
              critic: CriticScores | None) -> None:
    """The run's record, and one line per graded prediction (with its critic score, if it has one)."""
    scores = {} if critic is None else critic.scores
    seen: set[str] = set()
    lines = []
    for graded in grades.graded:
        first = graded.id not in seen
        seen.add(graded.id)
        lines.append({**asdict(graded), "critic_score": scores.get(graded.id) if first else None})
    write_jsonl(details, lines)
    write_json(out, record)


def run_config(params_runs: dict[str, GradingRunConfig], name: str) -> GradingRunConfig:
    if name not in params_runs:
        raise DataError(f"grading.runs: no run {name!r} (there are: {', '.join(params_runs) or 'none'})")
    return params_runs[name]
