"""How a debate's prompts grow round by round, for the context-window check made before paying.

Round 0 sends the system prompt and the question (with its worked examples). Round 1 quotes every agent's
round-0 reply, round 2 the judge's two picks, and the judge's ranking every round-1 reply: each quoted reply is
counted at debate.max_tokens, the longest it can be. The messages are the real ones with empty solutions, so the
fixed wording around each solution is counted too.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.context_fit import Prompt
from tracevote.debate import prompts
from tracevote.debate.protocol import Debate


def agent_prompts(debate: Debate) -> list[Prompt]:
    """The agents' prompts of one debate that never reaches consensus, one per round (each agent of a round
    gets the same message)."""
    cfg, pid = debate.cfg, debate.problem.id
    rounds = [Prompt(pid, "debate round 0", prompts.answer_messages(debate.asked, cfg))]
    if cfg.rounds >= 2:
        rounds.append(Prompt(pid, "debate round 1", prompts.revise_messages(debate.asked, [""] * cfg.agents, cfg),
                             quoted=cfg.agents))
    if cfg.rounds >= 3:
        rounds.append(Prompt(pid, "debate round 2", prompts.revise_messages(debate.asked, ["", ""], cfg), quoted=2))
    return rounds


def judge_prompts(debate: Debate) -> list[Prompt]:
    """The judge's ranking prompt, when the debate has a third round (none otherwise)."""
    cfg = debate.cfg
    if cfg.rounds < 3:
        return []
    return [Prompt(debate.problem.id, "debate ranking", prompts.rank_messages(debate.asked, [""] * cfg.agents, cfg),
                   quoted=cfg.agents)]


def prompts_by_endpoint(debates: Sequence[Debate], agents: ModelConfig,
                        judge: ModelConfig) -> list[tuple[ModelConfig, list[Prompt]]]:
    """Each endpoint the debates call with the prompts it gets: the agents' rounds, and the judge's ranking on the
    judge's endpoint (on the agents' own when the judge is theirs, so each endpoint is checked, and said, once)."""
    rounds = [prompt for debate in debates for prompt in agent_prompts(debate)]
    ranking = [prompt for debate in debates for prompt in judge_prompts(debate)]
    if judge.endpoint == agents.endpoint:
        return [(agents, rounds + ranking)]
    return [(agents, rounds), (judge, ranking)]
