"""`python -m tracevote grade` on the shared gold files, line by line, as the write-up's scorer prints them: the
critic off, and on against the simulated model (free text and structured replies). Every expected value is
worked out here from the shared file and the predictions this test writes, never taken from the program."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, SHARED_DIR
from tests.grading.test_cli import grade
from tests.sim_servers import final_state, ledger_in
from tracevote.cli.demo import write_params
from tracevote.report.tables import SIMULATED_BANNER

SHARED = SHARED_DIR / "data"  # ../shared/data, beside the clone, as CI places it
pytestmark = pytest.mark.skipif(not (SHARED / "gsm8k_test.jsonl").is_file(),
                                reason=f"{SHARED} is absent: these tests grade the shared gold files")
N_PREDICTED = 30  # the first 30 rows with an integer gold answer get a prediction; every third is wrong
CRITIC_ITEMS = 25


def _gsm8k(row: dict[str, Any], index: int) -> tuple[str, str]:
    return f"gsm8k_test_{index}", row["answer"].rsplit("####", 1)[1].strip()


def _amc23(row: dict[str, Any], index: int) -> tuple[str, str]:
    answer = float(row["answer"])  # 27.0
    return str(row["id"]), str(int(answer)) if answer.is_integer() else str(answer)


# dataset -> (the shared file, the scorer's name for it under --data-root, a row's (id, gold answer))
GOLD: dict[str, tuple[str, str, Callable[[dict[str, Any], int], tuple[str, str]]]] = {
    "gsm8k": ("gsm8k_test.jsonl", "gsm8k_test.jsonl", _gsm8k),
    "math500": ("math500_test.jsonl", "math500_test.jsonl", lambda row, _: (row["unique_id"], row["answer"])),
    "aime": ("aime_2024_with_solutions.jsonl", "aime_test.jsonl", lambda row, _: (str(row["id"]), str(row["answer"]))),
    "amc23": ("amc23_test.jsonl", "amc23_test.jsonl", _amc23),
}


def shared_rows(dataset: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SHARED / GOLD[dataset][0]).read_text().splitlines() if line.strip()]


def data_root(tmp_path: Path) -> Path:
    """The scorer's layout, DIR/test/<dataset>_test.jsonl, over the shared files."""
    root = tmp_path / "data"
    (root / "test").mkdir(parents=True)
    for shared, name, _ in GOLD.values():
        (root / "test" / name).symlink_to(SHARED / shared)
    return root


def write_predictions(path: Path, dataset: str) -> list[tuple[bool, int]]:
    """Predictions for the first N_PREDICTED rows whose gold is an integer (so right and wrong are plain: the gold,
    or the gold plus one); (right, words of its thinking) of each."""
    rows = [GOLD[dataset][2](row, index) for index, row in enumerate(shared_rows(dataset))]
    chosen = [(row_id, gold) for row_id, gold in rows if re.fullmatch(r"\d+", gold)][:N_PREDICTED]
    made, lines = [], []
    for index, (row_id, gold) in enumerate(chosen):
        right, words = index % 3 != 0, 7 * index + 3
        answer = gold if right else str(int(gold) + 1)
        lines.append(json.dumps({"id": row_id, "dataset": dataset, "thinking": " ".join(["step"] * words),
                                 "content": f"So the answer is {answer}.\n#### {answer}"}))
        made.append((right, words))
    path.write_text("\n".join(lines) + "\n")
    return made


def scorer_head(dataset: str, made: list[tuple[bool, int]]) -> list[str]:
    gold, right = len(shared_rows(dataset)), sum(r for r, _ in made)
    words = sum(w for _, w in made) / len(made)
    return [f"Loaded {gold} gold samples!", f"Accuracy: {right / gold:.4f}  ({right}/{gold})",
            f"Average word count: {words:.2f}"]


def stored_scores(critic_dir: Path, structured: bool) -> list[float | None]:
    """The critic's replies as the ledger keeps them, read here: a structured reply is one JSON object, a
    free-text one ends in {"score": n} or gives none; scores clamp to [1, 5]."""
    ledger = ledger_in(critic_dir)
    assert ledger is not None, f"no critic ledger under {critic_dir}"
    texts = [record.text for records in final_state(ledger.root).values() for record in records.values()]
    found = [[json.loads(text)["score"]] if structured else re.findall(r'\{"score": (-?\d+)\}', text)
             for text in texts]
    return [min(max(float(scores[-1]), 1.0), 5.0) if scores else None for scores in found]


def critic_tail(scores: list[float | None]) -> list[str]:
    parsed = [score for score in scores if score is not None]
    lines = [f"Evaluating {i}/{len(scores)}" for i in range(1, len(scores) + 1)]
    lines.append(f"LLM Critic avg score: {sum(parsed) / len(parsed):.2f}")
    unparsable = len(scores) - len(parsed)
    if unparsable:
        lines.append(f"LLM Critic unparsable replies: {unparsable}/{len(scores)} (no score; left out of the average)")
    return lines


def missing_note(dataset: str, made: list[tuple[bool, int]]) -> list[str]:
    """The note after the scorer's lines when gold items have no prediction (AIME's 30 all have one)."""
    missing = len(shared_rows(dataset)) - len(made)
    return [f"note: {missing} gold items have no prediction (counted wrong)"] if missing else []


def sim_params(cwd: Path, *, structured: bool = False) -> None:
    """The simulated model answering; the critic on gpt-4o-mini's endpoint (profile openai-chat: structured
    replies) when `structured`, else on DeepSeek's (json_object only: free text)."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text())
    params["model"]["backend"] = "sim"
    params["grading"]["critic"]["endpoint"] = "gpt-4o-mini" if structured else "deepseek"
    write_params(cwd / "params.yaml", params)


@pytest.mark.parametrize("dataset", list(GOLD))
def test_critic_off_prints_the_scorers_four_lines(tmp_path: Path, dataset: str) -> None:
    made = write_predictions(tmp_path / "preds.jsonl", dataset)
    result = grade(tmp_path, "--dataset", dataset, "--pred-path", str(tmp_path / "preds.jsonl"),
                   "--data-root", str(data_root(tmp_path)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [*scorer_head(dataset, made), "LLM critic disabled.",
                                          *missing_note(dataset, made)]


# (dataset, structured replies, at least this many unparsable): the simulated critic's free text is unparsable
# 8% of the time, its structured replies never
@pytest.mark.parametrize(("dataset", "structured", "least_unparsable"), [
    ("gsm8k", False, 1),
    ("math500", True, 0),
    ("aime", False, 0),
    ("aime", True, 0),
])
def test_critic_on_prints_one_evaluating_line_per_item_then_the_mean(tmp_path: Path, dataset: str, structured: bool,
                                                                     least_unparsable: int) -> None:
    sim_params(tmp_path, structured=structured)
    made = write_predictions(tmp_path / "preds.jsonl", dataset)
    result = grade(tmp_path, "--dataset", dataset, "--pred-path", str(tmp_path / "preds.jsonl"),
                   "--data-root", str(data_root(tmp_path)), "--enable-critic", "--critic-max-samples",
                   str(CRITIC_ITEMS), "--critic-dir", "critic")
    assert result.returncode == 0, result.stderr
    scores = stored_scores(tmp_path / "critic", structured)
    assert len(scores) == min(CRITIC_ITEMS, len(made))  # every predicted item has a reference solution
    assert scores.count(None) >= least_unparsable and (scores.count(None) == 0 or not structured)
    assert result.stdout.splitlines() == [f"*** {SIMULATED_BANNER} ***", *scorer_head(dataset, made),
                                          *critic_tail(scores), *missing_note(dataset, made)]


def test_critic_on_amc23_has_nothing_to_score(tmp_path: Path) -> None:
    sim_params(tmp_path)
    made = write_predictions(tmp_path / "preds.jsonl", "amc23")
    result = grade(tmp_path, "--dataset", "amc23", "--pred-path", str(tmp_path / "preds.jsonl"),
                   "--data-root", str(data_root(tmp_path)), "--enable-critic")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"*** {SIMULATED_BANNER} ***", *scorer_head("amc23", made),
        "LLM Critic avg score: n/a (nothing to score: no gold item with a reference solution has a prediction)",
        *missing_note("amc23", made)]
