"""Accuracy as the grading scorer defines it: the final answer of `content`, Math-Verify's verify(parse(gold),
parse(answer)) with gold first, the string fallback, pairing by id, and word counts.

The judge runs Math-Verify in worker processes with its signal timeouts off; these tests check that it gives
exactly what a plain main-thread call gives, from any thread, and that a pathological answer cannot hang it.
No test asserts elapsed time. The judge's limit is 1 s where a test proves a hang is cut short: a hang never
ends, and a warm worker compares 40 pairs in well under 0.1 s.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import hang_guard_s
from tracevote.answers.mathverify import MathJudge, MathVerdict, grading_fallback
from tracevote.answers.mathverify_worker import grading_outcome
from tracevote.grading.accuracy import final_answer, grade, pair_by_id, word_count
from tracevote.grading.gold import GoldItem
from tracevote.grading.predictions import Prediction

POWER_TOWER = "$9^{9^{9^{9^{9}}}}$"  # sympy evaluates it for ever (checked: minutes without an answer)
# sympy computes 9^(9^9) in C, where no signal reaches: in a main thread a 2 s SIGALRM (setitimer) had not stopped
# verify(parse("1"), parse(it)) after 100 s. Only a process can be stopped there, so the judge keeps its workers.
STUCK_IN_C = "$9^{9^{9^{9}}}$"

# (gold, final answer, equal): the scorer's verdicts, whatever our own answer reading would say. Its parse() of a
# bare LaTeX command without $...$ or \boxed finds nothing, so "\frac12" vs "0.5" is not equal there.
EQUIVALENCES = [
    ("0.5", "\\frac{1}{2}", True),  # a decimal gold, a fraction answer
    ("\\frac{1}{2}", "0.5", True),
    ("\\frac{14}{3}", "4.6667", False),  # rounded decimals are not the fraction
    ("\\frac12", "0.5", False),  # bare \frac12 parses to nothing
    ("$\\frac12$", "0.5", True),  # ... inside $...$ it is one half
    ("\\boxed{\\text{(B)}}", "\\boxed{B}", True),
    ("\\boxed{\\text{(B)}}", "B", False),  # a bare letter parses to nothing
    ("[1,2)", "[1, 2)", False),  # a bare interval parses to nothing
    ("$[1,2)$", "$[1, 2)$", True),
    ("$(1,2)$", "$[1,2)$", False),
    ("27", "27.0", True),  # AMC 2023's float golds, read "27"
    ("27", "27", True),
    ("18", "$18", True),
    ("18", "\\$18", False),
    ("18", "####", False),  # "#### " with nothing after it: the line itself is the answer
    ("10\\%", "10", True),
    ("7", "8", False),
    ("5", "x=5", True),
]


@pytest.fixture(scope="module")
def judge():
    with MathJudge(max_workers=2, timeout_s=60.0, chunk_size=4, rule="grading") as shared:
        yield shared


@pytest.mark.parametrize(("gold", "answer", "equal"), EQUIVALENCES)
def test_equivalences_through_the_judge(judge, gold, answer, equal):
    assert judge.compare(gold, answer) == MathVerdict(equal=equal, method="math_verify", reason=None)


def test_the_judge_gives_what_a_main_thread_call_gives(judge):
    from math_verify import parse, verify

    direct = [verify(parse(gold), parse(answer)) for gold, answer, _ in EQUIVALENCES]  # timeouts on: main thread
    assert [verdict.equal for verdict in judge.compare_many([(g, a) for g, a, _ in EQUIVALENCES])] == direct


def test_gold_goes_first():
    # An interval gold matches an inequality answer; the other way round it does not.
    assert grading_outcome("$x \\le 3$", "$(-\\infty,3]$") == (True, None)
    assert grading_outcome("$(-\\infty,3]$", "$x \\le 3$") == (False, None)


def test_threads_give_the_main_thread_verdicts(judge):
    pairs = [(gold, answer) for gold, answer, _ in EQUIVALENCES]
    expected = judge.compare_many(pairs)
    threads_seen = set()

    def compare_in_thread(_: int) -> list[MathVerdict]:
        threads_seen.add(threading.get_ident())
        return judge.compare_many(pairs)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(compare_in_thread, range(8)))
    assert threading.main_thread().ident not in threads_seen
    assert all(result == expected for result in results)


def test_a_pathological_answer_is_wrong_and_counted_not_a_hang():
    golds = [GoldItem("a", "p", "1", None), GoldItem("b", "p", "7", None)]
    predictions = [Prediction("a", None, "", f"#### {POWER_TOWER}", 1), Prediction("b", None, "", "#### 7", 2)]
    with MathJudge(max_workers=1, timeout_s=1.0, chunk_size=1, rule="grading") as judge:
        grades = grade(golds, predictions, judge)
    assert (grades.correct, grades.total, grades.unjudged, grades.string_fallbacks) == (1, 2, 1, 0)
    assert [g.method for g in grades.graded] == ["unjudged", "math_verify"]


@pytest.mark.parametrize("start_method", ["forkserver", "fork"])  # fork: grade's own judge (grading_judge)
def test_an_answer_stuck_in_c_is_wrong_and_counted_from_main_and_other_threads(start_method):
    golds = [GoldItem(str(i), "p", str(i), None) for i in range(40)]
    predictions = [Prediction(str(i), None, "", f"#### {STUCK_IN_C if i == 17 else i}", i) for i in range(40)]

    def graded():
        with MathJudge(max_workers=2, timeout_s=1.0, rule="grading", start_method=start_method) as judge:
            return grade(golds, predictions, judge)

    with ThreadPoolExecutor(max_workers=1) as thread:
        in_thread = thread.submit(graded).result(timeout=hang_guard_s())
    for grades in (graded(), in_thread):
        assert (grades.correct, grades.unjudged, grades.string_fallbacks) == (39, 1, 0)
        assert [g.id for g in grades.graded if g.method == "unjudged"] == ["17"]


def test_the_string_fallback_compares_stripped_lower_cased_text():
    assert grading_fallback(" Evelyn ", "evelyn", "comparison error") == MathVerdict(True, "string", "comparison error")
    assert grading_fallback("Evelyn", "Eve", "comparison error").equal is False
    assert grading_fallback("7", "7", "timeout") == MathVerdict(False, "unjudged", "timeout")
    assert grading_fallback("7", "7", "worker crashed") == MathVerdict(False, "unjudged", "worker crashed")


def test_an_exception_escaping_math_verify_falls_back_to_strings(monkeypatch):
    # Math-Verify catches its own errors (raise_on_error off), so an escaping one is rare: a failing library
    # stands in for it here (in this process; the judge's workers import the real one)
    import math_verify

    def broken_verify(*args: object, **kwargs: object) -> bool:
        raise RuntimeError("sympy blew up")

    monkeypatch.setattr(math_verify, "verify", broken_verify)
    assert grading_outcome("5", "5") == (None, "comparison error")
    assert grading_fallback("5", " 5", "comparison error") == MathVerdict(True, "string", "comparison error")


@pytest.mark.parametrize(("content", "answer"), [
    ("3 + 4 = 7\n#### 7", "7"),
    ("#### 1,234 ", "1,234"),
    ("first #### 3\nthen #### 4", "4"),
    ("The answer is 12.\n\n", "The answer is 12."),
    ("So the answer is 5.\n####", "####"),
    ("#### \n", "####"),
    ("", ""),
    ("\\boxed{6}", "\\boxed{6}"),
])
def test_final_answer(content, answer):
    assert final_answer(content) == answer


def test_word_count_splits_on_any_whitespace():
    assert (word_count(""), word_count("  one\ttwo\nthree  "), word_count("a,b c")) == (0, 3, 2)


def test_pairing_is_by_id_whatever_the_order():
    gold = [GoldItem(f"q{i}", f"problem {i}", str(i), None) for i in range(4)]
    predictions = [Prediction("q3", None, "x y", "#### 3", 1), Prediction("zz", None, "", "#### 0", 2),
                   Prediction("q0", None, "a b c d", "#### 9", 3), Prediction("q1", None, "one", "#### 1", 4)]
    pairing = pair_by_id(gold, predictions)
    assert [(item.id, p.line) for item, p in pairing.pairs] == [("q0", 3), ("q1", 4), ("q3", 1)]
    assert (pairing.missing, pairing.unmatched) == (["q2"], ["zz"])


def test_grade_counts_missing_predictions_as_wrong_and_averages_every_record(judge):
    gold = [GoldItem(f"q{i}", f"problem {i}", str(i), None) for i in range(4)]
    predictions = [Prediction("q3", None, "x y", "#### 3", 1), Prediction("zz", None, "", "#### 0", 2),
                   Prediction("q0", None, "a b c d", "#### 9", 3), Prediction("q1", None, "one", "#### 1", 4)]
    grades = grade(gold, predictions, judge)
    assert (grades.correct, grades.total, grades.missing, grades.unmatched) == (2, 4, 1, 1)
    assert grades.accuracy == 0.5
    assert grades.avg_word_count == (2 + 0 + 4 + 1) / 4  # every record, matched or not
    assert (grades.avg_word_count_correct, grades.avg_word_count_incorrect) == (1.5, 4.0)
    assert grades.first_unmatched == "zz"


def test_a_pool_grades_every_trace_of_a_problem(judge):
    gold = [GoldItem("p1", "problem", "5", None), GoldItem("p2", "problem", "6", None)]
    traces = [Prediction("p1", None, "w", "#### 5", 0), Prediction("p1", None, "w w", "#### 4", 1),
              Prediction("p1", None, "w", "#### 5", 2)]
    grades = grade(gold, traces, judge)
    assert (grades.correct, grades.total, grades.missing) == (2, 4, 1)  # 3 traces and one problem without any
