"""Baseline for `grade`: a plain main-thread Math-Verify loop, run as a script (a whole process).

    python bench/plain_grade.py --gold ../shared/data/gsm8k_test.jsonl --pred preds.jsonl --dataset gsm8k

It reads the gold file and the predictions (JSON lines {"id", "content", ...}), pairs them by id (GSM8K:
gsm8k_test_<row>, its gold after the last `####` of `answer`; MATH-500: `unique_id`, `answer`), takes each
prediction's final answer as the scorer does (after the last `####` of `content`) and counts
`verify(parse(gold), parse(answer))`, gold first, with Math-Verify's defaults. No threads, no workers, no
time limit: the loop `grade` must not be slower than. Prints `correct/total` as one JSON line.
"""

from __future__ import annotations

import argparse
import json

from math_verify import parse, verify


def gold_answers(path: str, dataset: str) -> dict[str, str]:
    answers = {}
    with open(path, encoding="utf-8") as f:
        for row, line in enumerate(f):
            record = json.loads(line)
            if dataset == "gsm8k":
                answers[f"gsm8k_test_{row}"] = record["answer"].rsplit("####", 1)[-1].strip()
            else:
                answers[record["unique_id"]] = str(record["answer"])
    return answers


def final_answer(content: str) -> str:
    after = content.rsplit("####", 1)[-1].strip() if "####" in content else ""
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    return after or (lines[-1] if lines else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gold", required=True)
    parser.add_argument("--pred", required=True)
    parser.add_argument("--dataset", required=True, choices=("gsm8k", "math500"))
    args = parser.parse_args()
    gold = gold_answers(args.gold, args.dataset)
    with open(args.pred, encoding="utf-8") as f:
        predictions = {record["id"]: final_answer(record["content"] or "") for record in map(json.loads, f)}
    correct = sum(bool(verify(parse(answer), parse(predictions.get(item, ""))))
                  for item, answer in gold.items())
    print(json.dumps({"correct": correct, "total": len(gold)}))


if __name__ == "__main__":
    main()
