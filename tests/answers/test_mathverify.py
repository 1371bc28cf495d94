"""The `math` answer format: Math-Verify comparisons in worker processes, from any thread, with a wall-clock limit.

Limits here are generous (a warm worker compares these in milliseconds) and no test asserts elapsed time.
"""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tracevote.answers.formats import gold_math
from tracevote.answers.mathverify import MathJudge, MathVerdict, normalize_answer_text, string_verdict

# A power tower sympy tries to evaluate and never finishes (checked: verify ran > 150 s without answering).
POWER_TOWER = "9^{9^{9^{9^{9}}}}"

# (gold, answer, equal): answers as models write them, decided by Math-Verify itself.
MATH_VERIFY_CASES = [
    ("\\frac{1}{2}", "0.5", True),
    ("\\dfrac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}", True),
    ("(1,2)", "(1, 2)", True),
    ("[1,2)", "[1, 2)", True),
    ("\\text{(B)}", "B", True),
    ("\\text{(B)}", "(B)", True),
    ("\\text{(B)}", "\\textbf{(B)}", True),
    ("10\\%", "10", True),
    ("5", "x=5", True),
    ("3, 4", "4,3", True),
    ("\\frac{\\pi}{2}", "\\pi/2", True),
    ("2\\sqrt{2}", "\\sqrt{8}", True),
    ("1000", "1,000", True),
    ("\\boxed{7}", "$7$", True),
    ("2x+3", "y = 2x+3", True),
    ("7", "8", False),
    ("\\frac{1}{2}", "0.4", False),
    ("\\frac{1}{2}", "2", False),
    ("(1,2)", "(2,1)", False),
    ("\\text{(B)}", "C", False),
    ("5", "x=6", False),
    ("\\frac{\\sqrt{3}}{2}", "\\frac{1}{2}", False),
    ("10\\%", "11", False),
]
PAIRS = [(gold, answer) for gold, answer, _ in MATH_VERIFY_CASES]


@pytest.fixture(scope="module")
def judge():
    # Small chunks and two workers, so a batch spans several chunks and waves.
    with MathJudge(max_workers=2, timeout_s=60.0, chunk_size=4) as shared:
        yield shared


@pytest.mark.parametrize(("gold", "answer", "equal"), MATH_VERIFY_CASES)
def test_compare_uses_math_verify(judge, gold, answer, equal):
    assert judge.compare(gold, answer) == MathVerdict(equal=equal, method="math_verify", reason=None)


def test_compare_many_keeps_order_across_chunks(judge):
    verdicts = judge.compare_many(PAIRS)
    assert [verdict.equal for verdict in verdicts] == [equal for _, _, equal in MATH_VERIFY_CASES]
    assert {verdict.method for verdict in verdicts} == {"math_verify"}
    assert judge.compare_many([]) == []


def test_threads_give_the_main_thread_verdicts(judge):
    in_main = [judge.compare(gold, answer) for gold, answer in PAIRS]
    with ThreadPoolExecutor(4) as threads:
        one_by_one = list(threads.map(lambda pair: judge.compare(*pair), PAIRS))
        batches = list(threads.map(judge.compare_many, [PAIRS[:7], PAIRS[7:15], PAIRS[15:]]))
    assert one_by_one == in_main
    assert [verdict for batch in batches for verdict in batch] == in_main


@pytest.mark.parametrize(
    ("gold", "answer", "verdict"),
    [
        ("", "3", MathVerdict(equal=False, method="string", reason="unparsable gold")),
        ("\\text{}", "\\text{}", MathVerdict(equal=False, method="string", reason="unparsable gold")),
        ("?", "?", MathVerdict(equal=True, method="string", reason="unparsable gold")),
        ("5", "", MathVerdict(equal=False, method="string", reason="unparsable answer")),
        ("5", "\\frac{", MathVerdict(equal=False, method="string", reason="unparsable answer")),
    ],
)
def test_unparsable_sides_fall_back_to_strings(judge, gold, answer, verdict):
    before = judge.fallbacks
    assert judge.compare(gold, answer) == verdict
    assert judge.fallbacks - before == Counter({verdict.reason: 1})


def test_a_hanging_comparison_is_killed_and_falls_back():
    before = set(threading.enumerate())
    # the tower never ends, and a warm worker compares a pair in milliseconds: 1 s is a wide margin either way
    with MathJudge(max_workers=1, timeout_s=1.0, chunk_size=4) as judge:
        # One chunk: it overruns, is killed, and its pairs are retried alone; only the tower overruns again.
        verdicts = judge.compare_many([("7", "7"), ("5", POWER_TOWER), ("\\frac{1}{2}", "0.5")])
        assert verdicts == [
            MathVerdict(equal=True, method="math_verify", reason=None),
            MathVerdict(equal=False, method="string", reason="timeout"),
            MathVerdict(equal=True, method="math_verify", reason=None),
        ]
        assert judge.fallbacks == Counter({"timeout": 1})
        assert judge.fallback_summary() == "1 comparison fell back to string comparison (timeout 1)"
    assert set(threading.enumerate()) - before == set()  # the pools it killed left no thread behind


@pytest.mark.parametrize("start_method", ["fork", "forkserver"])  # fork: grade's own judge (grading_judge)
def test_closing_a_judge_leaves_no_pool_thread_to_race_the_interpreters_exit(start_method):
    """Each pool's manager thread has ended when close returns. Left running, it closed its wake-up pipe while the
    exit hook of concurrent.futures wrote to it, unlocked before Python 3.12.8 (CPython gh-125451): a `grade`
    run could end in `OSError: [Errno 9] Bad file descriptor` (bench/stress_grade.py)."""
    before = set(threading.enumerate())
    with MathJudge(max_workers=2, timeout_s=60.0, rule="grading", start_method=start_method) as judge:
        verdicts = judge.compare_many([(str(i), str(i)) for i in range(40)])
    assert all(verdict.equal for verdict in verdicts)
    assert set(threading.enumerate()) - before == set()


def test_a_closed_judge_refuses_work():
    judge = MathJudge()
    judge.close()
    with pytest.raises(RuntimeError, match="closed"):
        judge.compare("1", "1")


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        (" $\\boxed{\\text{(B)}}$. ", "B"),
        ("\\dfrac{1}{ 2 }", "\\frac{1}{2}"),
        ("\\left( 1,\\, 2 \\right)", "(1,2)"),
        ("$$x = 5$$", "x=5"),
        ("\\mathrm{Monday}", "Monday"),
        ("\\boxed{\\boxed{42}}", "42"),
        ("0.5", "0.5"),
    ],
)
def test_normalize_answer_text(text, normal):
    assert normalize_answer_text(text) == normal


@pytest.mark.parametrize(
    ("gold", "answer", "equal"),
    [("\\boxed{42}", "$42$", True), ("\\frac{1}{2}", "0.5", False), ("", " $ $ ", False), ("(C)", "C", True)],
)
def test_string_verdict(gold, answer, equal):
    assert string_verdict(gold, answer, "timeout") == MathVerdict(equal=equal, method="string", reason="timeout")


def test_fallback_summary_counts_reasons():
    judge = MathJudge()
    assert judge.fallback_summary() is None
    judge._fallbacks.update(["timeout", "unparsable answer", "timeout", "unparsable answer", "unparsable answer"])
    assert judge.fallback_summary() == ("5 comparisons fell back to string comparison (timeout 2, unparsable answer 3)")
    judge.close()


@pytest.mark.parametrize(
    ("value", "gold"),
    [
        (" \\frac{14}{3} ", "\\frac{14}{3}"),
        (27, "27"),
        (0.5, "0.5"),
        ("(1,2)", "(1,2)"),
        ("\\text{(B)}", "\\text{(B)}"),
    ],
)
def test_gold_math_reads(value, gold):
    assert gold_math(value) == (gold, None)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "missing or empty"),
        ("", "missing or empty"),
        (" \n ", "missing or empty"),
        (True, "expected a LaTeX answer (text or a number), got True"),
        ([1], "expected a LaTeX answer (text or a number), got [1]"),
        ({"a": 1}, "expected a LaTeX answer (text or a number), got {'a': 1}"),
        (float("nan"), "nan is not a finite number"),
        (float("inf"), "inf is not a finite number"),
    ],
)
def test_gold_math_rejects(value, reason):
    assert gold_math(value) == (None, reason)
