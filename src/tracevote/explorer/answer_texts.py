"""The answers of a math pool's pages as the traces wrote them, not as the score table's class numbers.

On a problem of `answer_format: math` (a text gold, the score stage's own test), the score table keeps each trace's
answer as the code of its Math-Verify class (tracevote.answers.classes: 0, 1, ... by first appearance). A class's
text is the boxed answer of its first trace (the lowest sample id), read from the pool as the score stage read it
(answers.extract.split_boxed_text of the trace's content and reasoning), so Math-Verify-equal answers ("0.5",
"\\frac{1}{2}") show as one. The pool's text blocks only are decompressed. A pool whose samples are not on disk (a
project that pulled only the score table and the aggregate) gives no text: its pages keep the class numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tracevote.answers.extract import split_boxed_text
from tracevote.explorer.pool_inputs import PoolInputs
from tracevote.store.codec import TextFields
from tracevote.store.pool import pool_texts, read_manifest

ClassTexts = dict[int, str]  # class code -> its first trace's boxed text


def math_answer_texts(pool: PoolInputs, root: Path) -> dict[str, ClassTexts]:
    """Per math problem of `pool` with score rows, its classes' texts; {} when it has none or its samples are not
    on disk."""
    problem_ids = [problem.id for problem in pool.problems
                   if isinstance(problem.answer, str) and problem.id in pool.rows]
    manifest = root / pool.source.paths.manifest
    if not problem_ids or not _samples_on_disk(manifest):
        return {}
    _, texts = pool_texts(manifest, problem_ids)
    return {problem_id: class_texts(pool.rows[problem_id].columns, texts[problem_id]) for problem_id in problem_ids}


def _samples_on_disk(manifest: Path) -> bool:
    return manifest.is_file() and (read_manifest(manifest).pool_root(manifest) / "pool.json").is_file()


def class_texts(columns: dict[str, list], samples: Iterable[TextFields]) -> ClassTexts:
    """Each class code's text, from the first trace (lowest sample id) of the class whose text boxes an answer.

    >>> from tracevote.answers.extract import AnswerCandidates
    >>> def fields(i, text): return TextFields(i, text, "stop", AnswerCandidates(True, None, None))
    >>> class_texts({"sample_id": [2, 0, 1], "answer": [0, 0, None]},
    ...             [fields(0, r"\\boxed{0.5}"), fields(1, "none"), fields(2, r"\\boxed{\\frac12}")])
    {0: '0.5'}
    """
    boxed = {fields.sample_id: split_boxed_text(fields.text, fields.reasoning) for fields in samples}
    texts: ClassTexts = {}
    for sample_id, code in sorted((s, c) for s, c in zip(columns["sample_id"], columns["answer"], strict=True)
                                  if c is not None):
        text = boxed.get(sample_id)
        if code not in texts and text is not None:
            texts[code] = text
    return texts


def shown(answer: Any, texts: ClassTexts | None) -> Any:
    """The answer as a page shows it: its class's text where there is one, else as the score table holds it."""
    return answer if texts is None or answer is None else texts.get(answer, answer)
