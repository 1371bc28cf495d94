"""Write tinymath's held-out problem set, the file params.yaml's `tinymath` recipe reads.

    .venv/bin/python train/tinymath_heldout.py --out src/tracevote/datasets/data/tinymath_heldout.jsonl

Each row: id, problem, answer, the generator's version and seed, the solution's steps with their values (the
first-error labels of the model's own solutions come from them) and the solution's text (the grading critic's
reference solution).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from tracevote.datasets.tinymath import DEFAULT, GENERATOR_VERSION, Difficulty, Problem, generate

HELDOUT_SEED = 31  # the training problems come from seeds >= 1,000,003 (tinymath.TRAIN_SEED_OFFSET)
HELDOUT_COUNT = 100
# Harder than training (2-3 operations, 0-1 distractor): calibrated on seed 32 through the engine so that one
# trace at temperature 0.6 is right 30-70% of the time and many problems are sometimes right, sometimes wrong
# (the measured figures: models/tinymath.json).
HELDOUT_DIFFICULTY = dataclasses.replace(DEFAULT, min_operations=3, max_operations=3, min_distractors=1,
                                         max_distractors=3)


def heldout_row(problem: Problem, seed: int) -> dict[str, object]:
    return {"id": problem.id, "problem": problem.problem, "answer": problem.answer,
            "generator": GENERATOR_VERSION, "seed": seed,
            "steps": [{"text": step.text, "value": step.value} for step in problem.steps],
            "solution": problem.solution}


def heldout_lines(seed: int = HELDOUT_SEED, count: int = HELDOUT_COUNT,
                  difficulty: Difficulty = HELDOUT_DIFFICULTY) -> str:
    return "".join(json.dumps(heldout_row(problem, seed)) + "\n" for problem in generate(seed, count, difficulty))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=HELDOUT_SEED)
    parser.add_argument("--count", type=int, default=HELDOUT_COUNT)
    args = parser.parse_args(argv)
    args.out.write_text(heldout_lines(args.seed, args.count))
    print(f"wrote {args.count} problems to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
