"""Agent importance propagated backward from the final answer, on hand-computed examples."""

from __future__ import annotations

import pytest

from tests.debate.scripted import PROBLEM, answers_script, boxed, run_scripted, with_importance
from tracevote.debate.importance import agent_importance, reply_importance
from tracevote.debate.results import problem_result


def rated(answer: int, scores: str) -> str:
    return f"Reasoning. Scores: {scores} \\boxed{{{answer}}}"


def test_a_debate_ending_at_the_ranking_shares_importance_through_round_1_ratings() -> None:
    # Round 1 ends with agents 1 and 3 agreeing with the final answer 5: 1/2 each.
    # Their ratings of the round-0 solutions: agent 1 [[5, 5, 0, 0]] -> (0.5, 0.5, 0, 0);
    # agent 3 [[2, 2, 4, 2]] -> (0.2, 0.2, 0.4, 0.2). Round 0: agent 1 0.5*0.5 + 0.2*0.5 = 0.35, agent 2 0.35,
    # agent 3 0.4*0.5 = 0.2, agent 4 0.2*0.5 = 0.1. Totals: 0.85, 0.35, 0.7, 0.1.
    script = {**answers_script(r0=[1, 2, 3, 4]), "r1/agent1": rated(5, "[[5, 5, 0, 0]]"),
              "r1/agent2": rated(6, "[[1, 1, 1, 1]]"), "r1/agent3": rated(5, "[[2, 2, 4, 2]]"),
              "r1/agent4": boxed(8), "rank": "[1, 3]"}
    transcript, _ = run_scripted(script, with_importance())
    assert (transcript.stop, transcript.final_answer) == ("ranking", 5)
    replies = reply_importance(transcript)
    assert [replies[(0, i)] for i in range(4)] == pytest.approx([0.35, 0.35, 0.2, 0.1])
    assert [replies[(1, i)] for i in range(4)] == pytest.approx([0.5, 0.0, 0.5, 0.0])
    assert agent_importance(transcript, 4) == pytest.approx([0.85, 0.35, 0.7, 0.1])
    assert problem_result("toy", None, PROBLEM, transcript, with_importance()).rating_fallbacks == 1  # agent 4


def test_round_2_importance_flows_back_through_the_ranked_agents() -> None:
    # Picks: agents 2 and 4, who disagree; round 2: pick 1 (agent 2) says 20 and rates [[5, 0]] -> (1, 0);
    # pick 2 (agent 4) says 30 and rates [[3, 3]] -> (0.5, 0.5). 20 and 30 tie: the first pick's 20 wins,
    # so pick 1 gets 1. Round 1: agent 2 = 1*1 + 0.5*0 = 1, agent 4 = 0. Round 0: agent 2's round-1
    # reply rated all four equally: 0.25 each. Totals: 0.25, 2.25, 0.25, 0.25.
    uniform = "[[1, 1, 1, 1]]"
    script = {**answers_script(r0=[1, 2, 3, 4]), "r1/agent1": rated(5, uniform), "r1/agent2": rated(6, uniform),
              "r1/agent3": rated(7, uniform), "r1/agent4": rated(8, uniform), "rank": "[2, 4]",
              "r2/pick1": rated(20, "[[5, 0]]"), "r2/pick2": rated(30, "[[3, 3]]")}
    transcript, _ = run_scripted(script, with_importance())
    assert (transcript.stop, transcript.final_answer) == ("round2", 20)
    assert agent_importance(transcript, 4) == pytest.approx([0.25, 2.25, 0.25, 0.25])


def test_round_0_consensus_splits_importance_among_the_agreeing_agents() -> None:
    transcript, _ = run_scripted(answers_script(r0=[7, 9, 7, 7]), with_importance())
    assert agent_importance(transcript, 4) == pytest.approx([1 / 3, 0.0, 1 / 3, 1 / 3])


def test_no_final_answer_leaves_every_agent_at_zero() -> None:
    script = {**answers_script(r0=[None, None, None, None], r1=[None, None, None, None]), "rank": "[1, 2]",
              "r2/pick1": boxed(None), "r2/pick2": boxed(None)}
    transcript, _ = run_scripted(script, with_importance())
    assert transcript.final_answer is None
    assert agent_importance(transcript, 4) == [0.0, 0.0, 0.0, 0.0]
