"""Agent importance scores, propagated backward as DyLAN's LLMLP.backward does (code/MMLU/LLMLP.py).

Each reply of a round >= 1 is a node with an incoming edge from every solution it was shown, weighted by
its normalised rating of that solution (protocol.edge_weights). Backward from the final answer:
- the last round that ran: its replies that agree with the final answer share 1 equally (none agree: 0);
- an earlier reply: the sum, over the later replies it was shown to, of edge weight x their importance.
An agent's importance is the sum over its replies. Round 0 rates nothing, so a debate that ends there
gives the agreeing round-0 agents 1/m each.
"""

from __future__ import annotations

import collections

from tracevote.debate.protocol import Transcript, Turn


def reply_importance(transcript: Transcript) -> dict[tuple[int, int], float]:
    """Importance per reply, keyed (round, position in that round's replies)."""
    by_round = _rounds(transcript)
    last = max(by_round)
    agreeing = [i for i, t in enumerate(by_round[last])
                if transcript.final_answer is not None and t.answer == transcript.final_answer]
    importance = {(last, i): (1 / len(agreeing) if i in agreeing else 0.0) for i in range(len(by_round[last]))}
    for number in range(last - 1, -1, -1):
        for position, turn in enumerate(by_round[number]):
            importance[(number, position)] = sum(
                weight * importance[(number + 1, later)]
                for later, successor in enumerate(by_round[number + 1])
                for source, weight in zip(successor.rated, successor.weights, strict=True)
                if source == turn.agent)
    return importance


def agent_importance(transcript: Transcript, n_agents: int) -> list[float]:
    """Each agent's importance: the sum over its replies."""
    by_round = _rounds(transcript)
    totals = [0.0] * n_agents
    for (number, position), value in reply_importance(transcript).items():
        totals[by_round[number][position].agent] += value
    return totals


def _rounds(transcript: Transcript) -> dict[int, list[Turn]]:
    by_round: dict[int, list[Turn]] = collections.defaultdict(list)
    for turn in transcript.turns:
        by_round[turn.round].append(turn)
    return by_round
