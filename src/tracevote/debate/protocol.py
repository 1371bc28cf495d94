"""One debate, step by step, as DyLAN's MATH script runs it (code/MATH/llmlp_gen_math_listwise_cot.py).

1. Round 0: agents answer one after another. Once at least floor(2/3 n) + 1 replies are in, after each
   reply: consensus when the most common answer's count exceeds floor(2/3 x replies so far). A reply with
   no answer casts no vote but counts in the denominator. Consensus ends the debate.
2. Round 1: every agent revises from one message holding all round-0 solutions; the same check.
3. Ranking: a judge picks the best two round-1 solutions as [i, j] (the last such pair; duplicates allowed;
   unparsable: the first two agents, counted). If the two give the same answer, the debate ends.
4. Round 2: the two ranked agents revise from a message holding both ranked solutions; no check.
The final answer is the most common among the last round's agents, ties to the earliest listed (after the
ranking, the judge's first pick).

`debate()` is that procedure written once, as a generator that yields each call and receives its reply:
the build stage drives it through the runner (DebateConversation), the score stage replays it from the
ledger (replay), so both follow exactly the same path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

from tracevote.answers.extract import answer_candidates, resolve_answer
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_methods import DebateConfig
from tracevote.core.errors import DataError
from tracevote.datasets.problems import Problem
from tracevote.debate import prompts
from tracevote.store.calls import Call, CallRecord

Answer = int | None
STOPS = ("round0", "round1", "ranking", "round2", "rounds")  # "rounds": debate.rounds ran out first
JUDGE_KEY = "rank"
_RANKS = {n: re.compile(rf"\[([1-{n}]),\s*([1-{n}])\]") for n in range(3, 10)}
_SCORES = re.compile(r"\[\[(.*?)\]\]")


@dataclass(frozen=True)
class Turn:
    """One agent's reply in one round. `rated` are the agents whose solutions it was shown (in listed order),
    `weights` its normalised ratings of them (empty unless debate.importance)."""

    round: int
    agent: int  # 0-based
    record: CallRecord
    answer: Answer
    rated: tuple[int, ...] = ()
    weights: tuple[float, ...] = ()
    rating_fallback: bool = False


@dataclass(frozen=True)
class Transcript:
    problem_id: str
    turns: tuple[Turn, ...]
    judge: CallRecord | None
    picks: tuple[int, ...]  # the judge's two agents, 0-based, in its order; () when no ranking ran
    judge_fallback: bool
    stop: str
    deciders: tuple[Turn, ...]  # the replies the final answer is voted from
    final_answer: Answer

    @property
    def records(self) -> list[CallRecord]:
        return [turn.record for turn in self.turns] + ([self.judge] if self.judge is not None else [])


def most_common(answers: Sequence[Answer]) -> tuple[Answer, int]:
    """The most common answer and its count, ties to the earliest; a None casts no vote.

    >>> most_common([7, 3, 3, 7, None])
    (7, 2)
    >>> most_common([None, None])
    (None, 0)
    """
    best, best_count = None, 0
    for answer in answers:
        count = answers.count(answer) if answer is not None else 0
        if count > best_count:  # strictly greater: the earliest keeps a tie, as in DyLAN's most_frequent
            best, best_count = answer, count
    return best, best_count


def consensus(answers: Sequence[Answer], n_agents: int) -> Answer:
    """The consensus answer of the replies so far, or None: checked once at least floor(2/3 n) + 1 replies
    are in; reached when the top count exceeds floor(2/3 x replies so far)."""
    if len(answers) < 2 * n_agents // 3 + 1:
        return None
    top, count = most_common(answers)
    return top if count > 2 * len(answers) // 3 else None


def parse_picks(text: str, n_agents: int) -> tuple[tuple[int, int], bool]:
    """The judge's last "[i, j]" as 0-based agents, and whether it fell back to the first two (unparsable).

    >>> parse_picks("... so [1, 3] or rather [4,2]", 4)
    ((3, 1), False)
    >>> parse_picks("both are fine", 4)
    ((0, 1), True)
    """
    matches = _RANKS[n_agents].findall(text)
    if not matches:
        return (0, 1), True
    first, second = matches[-1]
    return (int(first) - 1, int(second) - 1), False


def parse_ratings(text: str, count: int) -> tuple[tuple[int, ...], bool]:
    """The last "[[s1, s2, ...]]" as integers (a non-integer entry is 0, as in DyLAN), and whether it was
    unusable as a whole (absent, or not `count` entries: then all zeros) or held a non-integer."""
    matches = _SCORES.findall(text)
    if not matches:
        return (0,) * count, True
    entries = matches[-1].replace(" ", "").split(",")
    scores = tuple(_int_or_zero(entry) for entry in entries)
    if len(scores) != count:
        return (0,) * count, True
    return scores, any(not _is_int(entry) for entry in entries)


def edge_weights(scores: Sequence[int]) -> tuple[float, ...]:
    """Ratings as incoming edge weights: s/5 clipped to [0, 1], normalised to sum 1 (all zero: uniform)."""
    clipped = [min(max(score / 5, 0.0), 1.0) for score in scores]
    total = sum(clipped)
    if total == 0:
        return tuple(1 / len(clipped) for _ in clipped)
    return tuple(weight / total for weight in clipped)


def _int_or_zero(entry: str) -> int:
    return int(entry) if _is_int(entry) else 0


def _is_int(entry: str) -> bool:
    try:
        int(entry)
    except ValueError:
        return False
    return True


Steps = Generator[Call, CallRecord, Transcript]


class Debate:
    """How one problem's debate is run under a setting: `steps()` is the procedure as a generator."""

    def __init__(self, problem: Problem, cfg: DebateConfig, answers: AnswersConfig) -> None:
        self.problem = problem
        self.cfg = cfg
        self.answers = answers
        self.asked = prompts.question(problem.problem, cfg)

    def answer_of(self, record: CallRecord) -> Answer:
        return resolve_answer(answer_candidates(record.text), record.finish_reason, self.answers)[0]

    def steps(self) -> Steps:
        cfg, n = self.cfg, self.cfg.agents
        first = prompts.answer_messages(self.asked, cfg)
        round0: list[Turn] = []
        for agent in range(n):
            record = yield self._call(f"r0/agent{agent + 1}", prompts.ANSWER, first)
            round0.append(Turn(0, agent, record, self.answer_of(record)))
            if consensus([t.answer for t in round0], n) is not None:
                return self._end(round0, "round0", round0)
        if cfg.rounds == 1:
            return self._end(round0, "rounds", round0)

        round1, agreed = yield from self._revise_round(1, round0, list(range(n)), check=True)
        if agreed:
            return self._end([*round0, *round1], "round1", round1)
        if cfg.rounds == 2:
            return self._end([*round0, *round1], "rounds", round1)

        judge = yield self._call(JUDGE_KEY, prompts.RANK, prompts.rank_messages(
            self.asked, [t.record.text for t in round1], cfg))
        picks, fallback = parse_picks(judge.text, n)
        ranked = [round1[pick] for pick in picks]
        turns = [*round0, *round1]
        if ranked[0].answer is not None and ranked[0].answer == ranked[1].answer:
            return self._end(turns, "ranking", ranked, judge, picks, fallback)
        round2, _ = yield from self._revise_round(2, ranked, list(picks), check=False)
        return self._end([*turns, *round2], "round2", round2, judge, picks, fallback)

    def _revise_round(self, number: int, shown: list[Turn], agents: list[int], *, check: bool) -> Generator[
            Call, CallRecord, tuple[list[Turn], bool]]:
        """Each of `agents` revises from one message holding the `shown` solutions; with `check`, stops at
        consensus. The replies, and whether consensus was reached. Round 2's calls are keyed by the judge's
        pick (pick1, pick2): a pick may repeat."""
        messages = prompts.revise_messages(self.asked, [t.record.text for t in shown], self.cfg)
        rated = tuple(t.agent for t in shown)
        turns: list[Turn] = []
        for slot, agent in enumerate(agents):
            key = f"r{number}/agent{agent + 1}" if check else f"r{number}/pick{slot + 1}"
            record = yield self._call(key, prompts.REVISE, messages)
            turns.append(self._turn(number, agent, record, rated))
            if check and consensus([t.answer for t in turns], self.cfg.agents) is not None:
                return turns, True
        return turns, False

    def _turn(self, number: int, agent: int, record: CallRecord, rated: tuple[int, ...]) -> Turn:
        if not self.cfg.importance:
            return Turn(number, agent, record, self.answer_of(record))
        scores, fallback = parse_ratings(record.text, len(rated))
        return Turn(number, agent, record, self.answer_of(record), rated, edge_weights(scores), fallback)

    def _call(self, key: str, kind: str, messages: list[dict[str, str]]) -> Call:
        return Call(self.problem.id, key, kind, messages)

    def _end(self, turns: list[Turn], stop: str, deciders: list[Turn], judge: CallRecord | None = None,
             picks: tuple[int, ...] = (), fallback: bool = False) -> Transcript:
        final, _ = most_common([t.answer for t in deciders])
        return Transcript(self.problem.id, tuple(turns), judge, picks, fallback, stop, tuple(deciders), final)


class DebateConversation:
    """A debate as the runner's step function: replays the replies so far through `Debate.steps`."""

    def __init__(self, debate: Debate) -> None:
        self.debate = debate

    def next_call(self, replies: Sequence[CallRecord]) -> Call | None:
        given = iter(replies)
        reached, _ = advance(self.debate, lambda call: next(given, None))
        return reached if isinstance(reached, Call) else None


def advance(debate: Debate, reply_for: Callable[[Call], CallRecord | None]) -> tuple[Call | Transcript, int]:
    """Run the debate from its start, answering each call with `reply_for(call)`, until a call gets None
    (returned: that call) or the debate ends (returned: its transcript); and how many replies were given."""
    steps = debate.steps()
    given = 0
    try:
        call = next(steps)
        while (reply := reply_for(call)) is not None:
            call = steps.send(reply)
            given += 1
    except StopIteration as done:
        return done.value, given
    return call, given


def replay(debate: Debate, load: Callable[[Call], CallRecord]) -> Transcript:
    """The whole debate from stored replies; `load` raises DataError for a call that is not stored."""
    try:
        transcript, _ = advance(debate, load)
    except DataError as exc:
        raise DataError(f"the debate of {debate.problem.id} is incomplete ({exc}); run build_debate, which "
                        f"requests only the missing calls") from None
    assert isinstance(transcript, Transcript)  # `load` answers every call or raises
    return transcript
