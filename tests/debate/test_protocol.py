"""The debate's procedure on scripted replies: consensus arithmetic, each early stop, the judge's fallback,
the final-answer tie rule and the messages each call carries (DyLAN's MATH script, adapted to AIME)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.debate.scripted import CFG, answers_script, boxed, run_scripted
from tracevote.debate import prompts
from tracevote.debate.protocol import consensus, edge_weights, most_common, parse_picks, parse_ratings


@pytest.mark.parametrize(("answers", "expected"), [
    ([5, 5, 5], 5),  # 3 of 3 > floor(2/3 x 3) = 2
    ([5, 5, 7], None),  # 2 of 3
    ([5, 5, 7, 5], 5),  # 3 of 4 > floor(2/3 x 4) = 2
    ([5, 5, 7, None], None),  # 2 of 4: the no-answer casts no vote but counts in the denominator
    ([5, 5, 5, 5], 5),  # 4 of 4
    ([5, None, 5, 5], 5),
    ([5, 5], None),  # fewer than floor(2/3 x 4) + 1 = 3 replies: not checked yet
    ([None, None, None], None),
])
def test_consensus_needs_more_than_two_thirds_of_the_replies_so_far(answers: list, expected: int | None) -> None:
    assert consensus(answers, n_agents=4) == expected


def test_most_common_keeps_the_earliest_of_a_tie_and_ignores_no_answers() -> None:
    assert most_common([None, 8, 3, 3, 8]) == (8, 2)
    assert most_common([None, None]) == (None, 0)


def test_consensus_in_round_0_stops_after_the_third_agent() -> None:
    transcript, calls = run_scripted(answers_script(r0=[9, 9, 9]))
    assert [c.key for c in calls] == ["r0/agent1", "r0/agent2", "r0/agent3"]
    assert (transcript.stop, transcript.final_answer, len(transcript.deciders)) == ("round0", 9, 3)


def test_consensus_in_round_1_stops_before_the_judge() -> None:
    transcript, calls = run_scripted(answers_script(r0=[1, 2, 3, 4], r1=[7, 7, 7]))
    assert [c.key for c in calls][4:] == ["r1/agent1", "r1/agent2", "r1/agent3"]
    assert (transcript.stop, transcript.final_answer, transcript.judge) == ("round1", 7, None)


def test_consensus_on_the_last_reply_of_round_1_also_stops() -> None:
    transcript, calls = run_scripted(answers_script(r0=[1, 2, 3, 4], r1=[7, 7, 8, 7]))
    assert (transcript.stop, transcript.final_answer, len(calls)) == ("round1", 7, 8)


def test_agreeing_ranked_agents_stop_before_round_2() -> None:
    script = {**answers_script(r0=[1, 2, 3, 4], r1=[5, 6, 5, 8]), "rank": "I pick [3, 1]"}
    transcript, calls = run_scripted(script)
    assert calls[-1].key == "rank" and len(calls) == 9
    assert (transcript.stop, transcript.picks, transcript.final_answer) == ("ranking", (2, 0), 5)
    assert not transcript.judge_fallback


def test_an_unparsable_ranking_falls_back_to_the_first_two_agents() -> None:
    script = {**answers_script(r0=[1, 2, 3, 4], r1=[5, 6, 7, 8]), "rank": "Solutions 1 and 3 look best.",
              "r2/pick1": boxed(11), "r2/pick2": boxed(12)}
    transcript, calls = run_scripted(script)
    assert (transcript.picks, transcript.judge_fallback, transcript.stop) == ((0, 1), True, "round2")
    assert [c.key for c in calls][-2:] == ["r2/pick1", "r2/pick2"]
    assert transcript.final_answer == 11  # a tie goes to the judge's first pick


def test_the_last_pair_counts_and_a_tie_goes_to_the_judges_first_pick() -> None:
    script = {**answers_script(r0=[1, 2, 3, 4], r1=[5, 6, 7, 8]), "rank": "[1, 2] at first, finally [4, 2]",
              "r2/pick1": boxed(30), "r2/pick2": boxed(20)}
    transcript, _ = run_scripted(script)
    assert transcript.picks == (3, 1)
    assert [(t.agent, t.answer) for t in transcript.deciders] == [(3, 30), (1, 20)]
    assert transcript.final_answer == 30


def test_a_repeated_pick_is_kept_as_in_the_original() -> None:
    agreeing = {**answers_script(r0=[1, 2, 3, 4], r1=[5, 6, 7, 8]), "rank": "[2, 2]"}
    transcript, _ = run_scripted(agreeing)
    assert (transcript.picks, transcript.stop, transcript.final_answer) == ((1, 1), "ranking", 6)
    unanswered = {**answers_script(r0=[1, 2, 3, 4], r1=[5, None, 7, 8]), "rank": "[2, 2]",
                  "r2/pick1": boxed(40), "r2/pick2": boxed(41)}
    transcript, _ = run_scripted(unanswered)  # the same agent twice, both without an answer: round 2 runs
    assert (transcript.stop, [t.agent for t in transcript.deciders], transcript.final_answer) == ("round2", [1, 1], 40)


def test_with_fewer_rounds_the_last_rounds_majority_decides() -> None:
    two_rounds = dataclasses.replace(CFG, rounds=2)
    transcript, calls = run_scripted(answers_script(r0=[1, 2, 3, 4], r1=[1, 2, 2, 1]), two_rounds)
    assert (transcript.stop, len(calls), transcript.final_answer) == ("rounds", 8, 1)  # 1 and 2 tie: agent 1's
    one_round = dataclasses.replace(CFG, rounds=1)
    transcript, _ = run_scripted(answers_script(r0=[None, 2, 3, 3]), one_round)
    assert (transcript.stop, transcript.final_answer) == ("rounds", 3)


def test_every_call_carries_the_messages_dylan_sends() -> None:
    script = {**answers_script(r0=[1, 2, 3, 4], r1=[5, 6, 7, 8]), "rank": "[3, 2]",
              "r2/pick1": boxed(9), "r2/pick2": boxed(9)}
    _, calls = run_scripted(script)
    by_key = {c.key: c for c in calls}
    system = {"role": "system", "content": CFG.system}
    asked = "Problem: What is 6 x 7?\nBox the answer."
    assert by_key["r0/agent1"].messages == [system, {"role": "user", "content": asked}]
    assert by_key["r0/agent1"].kind == prompts.ANSWER
    revise = by_key["r1/agent2"].messages
    assert len(revise) == 2 and revise[0] == system, "each agent's context is reset to [system, message]"
    assert revise[1]["content"].startswith(asked + prompts.OTHERS)
    assert revise[1]["content"].count("One agent's solution: ```") == 4  # its own round-0 solution included
    assert revise[1]["content"].endswith("Notice that the former answers might be all wrong.")
    assert by_key["r1/agent1"].messages == revise, "every agent of a round reads the same message"
    judge = by_key["rank"].messages
    assert [m["role"] for m in judge] == ["user"], "the judge gets no system prompt"
    assert "Agent solution 4: ```Reasoning. \\boxed{8}```" in judge[0]["content"]
    assert judge[0]["content"].endswith("[1,2] or [3,4] at the end of your response.")
    round2 = by_key["r2/pick1"].messages[1]["content"]
    assert round2.index(boxed(7)) < round2.index(boxed(6)), "the ranked solutions are listed in the judge's order"
    assert round2.count("One agent's solution") == 2


def test_examples_come_first_and_dylans_opening_follows_them() -> None:
    cfg = dataclasses.replace(CFG, examples="Problem: 1+1?\nAnswer: \\boxed{2}")
    _, calls = run_scripted(answers_script(r0=[1, 2, 3, 4], r1=[5, 5, 5]), cfg)
    assert calls[0].messages[1]["content"].startswith("Problem: 1+1?\nAnswer: \\boxed{2}\n\nProblem: What is 6 x 7?")
    assert calls[4].messages[1]["content"].startswith(prompts.FOLLOW_EXAMPLES + cfg.examples)


@pytest.mark.parametrize(("text", "expected"), [
    ("scores [[5, 3, 2, 1]]", ((5, 3, 2, 1), False)),
    ("first [[1,1,1,1]] then [[4, 4, 4, 2]]", ((4, 4, 4, 2), False)),
    ("[[5, 3, good, 1]]", ((5, 3, 0, 1), True)),  # a non-integer entry scores 0 (DyLAN's convert)
    ("[[5, 3]]", ((0, 0, 0, 0), True)),  # wrong count: all zeros
    ("no scores at all", ((0, 0, 0, 0), True)),
])
def test_ratings_parse_the_last_double_bracket_list(text: str, expected: tuple) -> None:
    assert parse_ratings(text, 4) == expected


def test_ratings_become_normalised_clipped_edge_weights() -> None:
    assert edge_weights([5, 0, 10, -1]) == (0.5, 0.0, 0.5, 0.0)  # s/5 clipped to [0, 1], then normalised
    assert edge_weights([2, 2, 4, 2]) == pytest.approx((0.2, 0.2, 0.4, 0.2))
    assert edge_weights([0, 0, 0, 0]) == (0.25, 0.25, 0.25, 0.25)  # all zero: uniform


def test_picks_are_one_digit_agent_numbers_within_range() -> None:
    assert parse_picks("[5, 1] then [2,3]", 4) == ((1, 2), False)
    assert parse_picks("[5, 1]", 4) == ((0, 1), True)  # agent 5 does not exist among 4
    assert parse_picks("[5, 1]", 5) == ((4, 0), False)
