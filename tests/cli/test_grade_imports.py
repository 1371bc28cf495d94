"""`python -m tracevote grade` on a file starts fast: the critic's, the pool's and Parquet's libraries load only when
they are used (together ~1-2 s of start-up on a busy machine, more than grading GSM8K takes). Math-Verify (and
sympy) load in the grading process, which forks the judge's workers from itself once they are loaded (where the
platform forks), as a plain loop would load them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import hang_guard_s

HEAVY = ("numpy", "pandas", "pyarrow", "requests")
GRADE_THEN_LIST_HEAVY = """
import sys
from tracevote.cli.main import main
main(["grade", "--dataset", "gsm8k", "--pred-path", "preds.jsonl", "--gold", "gold.jsonl", "--json"])
print(" ".join(name for name in {heavy!r} if name in sys.modules) or "none")
"""


def test_grading_a_file_imports_no_heavy_library(tmp_path: Path) -> None:
    gold = [{"question": "1 + 1?", "answer": "one and one\n#### 2"}, {"question": "2 + 2?", "answer": "#### 4"}]
    (tmp_path / "gold.jsonl").write_text("".join(json.dumps(row) + "\n" for row in gold))
    (tmp_path / "preds.jsonl").write_text(json.dumps({"id": "gsm8k_test_0", "thinking": "w", "content": "#### 2"}))
    code = GRADE_THEN_LIST_HEAVY.format(heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                         timeout=hang_guard_s()).stdout.splitlines()
    assert json.loads(out[0])["correct"] == 1
    assert out[-1] == "none"
