"""`python -m tracevote grade` on small files: the scorer's lines, --json, the project's normalized gold, the
critic on the simulated model (asked once), and bad input (exit 2, one message naming the file and line)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, hang_guard_s
from tests.dvcproject import project_env, run_stage, update_endpoint
from tracevote.cli.demo import BUILTIN_GSM8K, BUILTIN_PREDICTIONS, local_dataset, write_params

JSON_KEYS = {"accuracy", "correct", "total", "missing", "string_fallbacks", "avg_word_count", "critic_score",
             "critic_scored", "critic_unparsable"}


def grade(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracevote", "grade", *args], cwd=cwd, env=project_env(),
                          capture_output=True, text=True, timeout=hang_guard_s())


def predictions_for_gsm8k(tmp_path: Path) -> Path:
    """The demo predictions under GSM8K's own ids (gsm8k_test_<row>), shuffled: pairing is by id."""
    lines = BUILTIN_PREDICTIONS.read_text().splitlines()
    path = tmp_path / "preds.jsonl"
    path.write_text("\n".join(line.replace("demo_gsm8k_test_", "gsm8k_test_") for line in reversed(lines)) + "\n")
    return path


def sim_project(tmp_path: Path) -> Path:
    """params.yaml on the simulated model, and the demo GSM8K-layout file normalized as data/gsm8k.jsonl."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text())
    update_endpoint(params, backend="sim", name="tracevote-sim", needs_key=False, extra_body={})
    params["datasets"]["gsm8k"] = local_dataset(BUILTIN_GSM8K, problem_key="question", answer_format="integer")
    write_params(tmp_path / "params.yaml", params)
    run_stage(tmp_path, "normalize.py", "--dataset", "gsm8k", "--raw", str(BUILTIN_GSM8K), "--out", "data/gsm8k.jsonl")
    return tmp_path


def lines_by_hand() -> list[str]:
    """The scorer's first three lines worked out from the two files: 8 gold rows; a prediction is right when the
    last number after its last '####' is the gold's (rows 0, 1, 3 "$60" and 7; row 5 gives none, row 6 has no
    prediction); words are the thinking's whitespace-separated parts (151 in 7 predictions)."""
    rows = [json.loads(line) for line in BUILTIN_GSM8K.read_text().splitlines()]
    gold = {f"demo_gsm8k_test_{row}": record["answer"].rsplit("####", 1)[1].strip() for row, record in enumerate(rows)}
    predictions = [json.loads(line) for line in BUILTIN_PREDICTIONS.read_text().splitlines()]
    right = sum(re.findall(r"\d+", p["content"].rsplit("####", 1)[1])[-1:] == [gold[p["id"]]] for p in predictions)
    words = [len(p["thinking"].split()) for p in predictions]
    return [f"Loaded {len(gold)} gold samples!", f"Accuracy: {right / len(gold):.4f}  ({right}/{len(gold)})",
            f"Average word count: {sum(words) / len(words):.2f}"]


def test_plain_output_is_the_scorers_four_lines(tmp_path: Path) -> None:
    result = grade(sim_project(tmp_path), "--dataset", "gsm8k", "--pred-path", str(predictions_for_gsm8k(tmp_path)),
                   "--gold", str(BUILTIN_GSM8K))
    assert result.returncode == 0, result.stderr
    assert lines_by_hand() == ["Loaded 8 gold samples!", "Accuracy: 0.5000  (4/8)", "Average word count: 21.57"]
    assert result.stdout.splitlines()[:4] == [*lines_by_hand(), "LLM critic disabled."]
    assert "note: 1 gold items have no prediction (counted wrong)" in result.stdout


def test_json_output_and_the_projects_normalized_gold_agree_with_the_gold_file(tmp_path: Path) -> None:
    project = sim_project(tmp_path)
    predictions = str(predictions_for_gsm8k(tmp_path))
    from_file = grade(project, "--dataset", "gsm8k", "--pred-path", predictions, "--gold", str(BUILTIN_GSM8K), "--json")
    from_project = grade(project, "--dataset", "gsm8k", "--pred-path", predictions, "--json")
    assert from_file.returncode == 0 and from_project.returncode == 0, from_file.stderr + from_project.stderr
    summary = json.loads(from_file.stdout)
    assert set(summary) >= JSON_KEYS and summary == json.loads(from_project.stdout)
    assert (summary["correct"], summary["total"], summary["missing"], summary["critic_score"]) == (4, 8, 1, None)


def test_the_critic_on_the_simulated_model_is_asked_once(tmp_path: Path) -> None:
    project = sim_project(tmp_path)
    args = ("--dataset", "gsm8k", "--pred-path", str(predictions_for_gsm8k(tmp_path)), "--enable-critic",
            "--critic-max-samples", "5", "--json")
    first = grade(project, *args)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)  # the critic's progress went to stderr: stdout is one JSON object
    assert summary["critic_scored"] + summary["critic_unparsable"] == 5 and summary["simulated"] is True
    assert "5 of 5 critic replies missing" in first.stderr
    again = grade(project, *args)
    assert "no request sent" in again.stderr and json.loads(again.stdout) == summary


def test_a_bad_predictions_line_is_one_error_naming_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "gsm8k_test_0", "content": "#### 38"}\n["not", "an", "object"]\n')
    result = grade(sim_project(tmp_path), "--dataset", "gsm8k", "--pred-path", str(bad), "--gold", str(BUILTIN_GSM8K))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"error: {bad}: 1 bad line(s), nothing graded")
    assert "line 2: expected an object, got list" in result.stderr and "Traceback" not in result.stderr


def test_without_the_projects_gold_the_error_says_how_to_get_it(tmp_path: Path) -> None:
    write_params(tmp_path / "params.yaml", yaml.safe_load(FIXTURE_PARAMS.read_text()))
    result = grade(tmp_path, "--dataset", "aime", "--pred-path", str(predictions_for_gsm8k(tmp_path)))
    assert result.returncode == 2
    assert "data/aime_2024.jsonl: problems file not found (run `dvc repro normalize@aime_2024`)" in result.stderr


@pytest.mark.parametrize(("dataset", "stem"), [("gsm8k", "gsm8k_test"), ("math500", "math500_test"),
                                               ("aime", "aime_test"), ("amc23", "amc23_test")])
def test_data_root_reads_the_scorers_layout_and_names_a_missing_file(tmp_path: Path, dataset: str, stem: str) -> None:
    root = tmp_path / "data"
    (root / "test").mkdir(parents=True)
    args = ("--dataset", dataset, "--pred-path", str(predictions_for_gsm8k(tmp_path)), "--data-root", str(root))
    missing = grade(tmp_path, *args)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.startswith(f"error: {root / 'test' / stem}.jsonl: gold file not found")
    if dataset == "gsm8k":  # the same file under the scorer's name grades as --gold does
        (root / "test" / f"{stem}.jsonl").write_text(BUILTIN_GSM8K.read_text())
        from_root, from_gold = grade(tmp_path, *args), grade(tmp_path, *args[:4], "--gold", str(BUILTIN_GSM8K))
        assert from_root.returncode == 0, from_root.stderr
        assert from_root.stdout == from_gold.stdout and from_root.stdout.startswith("Loaded 8 gold samples!\n")


def test_gold_and_data_root_together_are_an_error(tmp_path: Path) -> None:
    result = grade(tmp_path, "--dataset", "gsm8k", "--pred-path", str(predictions_for_gsm8k(tmp_path)),
                   "--gold", str(BUILTIN_GSM8K), "--data-root", str(tmp_path))
    assert result.returncode == 2 and result.stdout == ""
    assert "argument --data-root: not allowed with argument --gold" in result.stderr
