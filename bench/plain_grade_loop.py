"""bench_grade's baseline: a plain main-thread loop, ``verify(parse(gold), parse(answer))`` with gold first.

No tracevote import: this is what a user would write by hand (Math-Verify's own signal timeouts, on by default
in the main thread). Prints one JSON object, {"correct": c, "graded": n}, so bench_grade can check that both
sides agree.
    python bench/plain_grade_loop.py gsm8k ../shared/data/gsm8k_test.jsonl preds.jsonl
"""

from __future__ import annotations

import json
import sys

from math_verify import parse, verify


def gold_answers(dataset: str, path: str) -> dict[str, str]:
    """id -> gold answer: GSM8K's after the last ``####`` (ids gsm8k_test_<row>), MATH-500's `answer` by `unique_id`."""
    with open(path, encoding="utf-8") as file:
        rows = [json.loads(line) for line in file if line.strip()]
    if dataset == "gsm8k":
        return {f"gsm8k_test_{i}": row["answer"].rsplit("####", 1)[1].strip() for i, row in enumerate(rows)}
    return {row["unique_id"]: row["answer"] for row in rows}


def final_answer(content: str) -> str:
    """After the last ``####`` when that is not blank, else the last non-blank line (the scorer's rule)."""
    if "####" in content:
        after = content.rsplit("####", 1)[1].strip()
        if after:
            return after
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def main(dataset: str, gold_path: str, pred_path: str) -> None:
    gold = gold_answers(dataset, gold_path)
    with open(pred_path, encoding="utf-8") as file:
        predictions = [json.loads(line) for line in file if line.strip()]
    correct = graded = 0
    for prediction in predictions:
        if prediction["id"] in gold:
            graded += 1
            correct += bool(verify(parse(gold[prediction["id"]]), parse(final_answer(prediction["content"] or ""))))
    print(json.dumps({"correct": correct, "graded": graded}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
