"""The debate's messages, worded as DyLAN's MATH script words them (code/MATH/llmlp_gen_math_listwise_cot.py).

Three kinds of call, each marked for the simulated model (see tracevote.sampling.prompts):
- ANSWER, round 0: [system, the question].
- REVISE, rounds >= 1: [system, one message holding the question and the earlier solutions]; every agent of
  a round gets the same message, its own earlier solution included, and no earlier context.
- RANK, the judge: one user message listing "Agent solution i" and asking for the best two as [i, j].

AIME adaptation: the question is `debate.question` with the problem in it, after `debate.examples` when
set (a built-in set is rendered by tracevote.debate.examples). As in DyLAN, the question with its examples
is what every later message quotes. DyLAN's "Follow the given examples and answer the mathematics problem."
opens the revise and rank messages only when there are examples to follow.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracevote.core.config_methods import DebateConfig
from tracevote.debate.examples import examples_text

ANSWER = "debate_answer"
REVISE = "debate_revise"
RANK = "debate_rank"

FOLLOW_EXAMPLES = "Follow the given examples and answer the mathematics problem.\n\n"
OTHERS = "\n\nThese are the solutions to the problem from other agents: "
SOLUTION = "\n\nOne agent's solution: ```{}```"
UPDATE = ("\n\nUsing the reasoning from other agents as additional advice with critical thinking, can you give an "
          "updated answer? Examine your solution and that other agents step by step. Notice that the former "
          "answers might be all wrong.")
# DyLAN's importance prompt (code/MMLU/prompt_lib.py), appended when debate.importance is on.
RATE = (" Along with the answer, give a score ranged from 1 to 5 to the solutions of other agents. "
        "Put all {} scores in the form like [[1, 5, 2, ...]].")
RANKED_SOLUTION = "\n\nAgent solution {}: ```{}```"
CHOOSE = ("\n\nPlease choose the best 2 solutions and think step by step. Put your answer in the form like "
          "[1,2] or [3,4] at the end of your response.")


def question(problem: str, cfg: DebateConfig) -> str:
    """The problem as the agents read it: the examples (if any), then `debate.question` filled in."""
    # Plain replacement, not str.format: the text is full of LaTeX braces such as \boxed{}.
    asked = cfg.question.replace("{problem}", problem)
    examples = examples_text(cfg.examples)
    return f"{examples}\n\n{asked}" if examples else asked


def answer_messages(asked: str, cfg: DebateConfig) -> list[dict[str, str]]:
    return _with_system([{"role": "user", "content": asked}], cfg)


def revise_messages(asked: str, solutions: Sequence[str], cfg: DebateConfig) -> list[dict[str, str]]:
    """Round >= 1: the question and every solution listed, then the request to update (and to rate them,
    when importance is on)."""
    listed = "".join(SOLUTION.format(text) for text in solutions)
    rate = RATE.format(len(solutions)) if cfg.importance else ""
    content = _opening(cfg) + asked + OTHERS + listed + UPDATE + rate
    return _with_system([{"role": "user", "content": content}], cfg)


def rank_messages(asked: str, solutions: Sequence[str], cfg: DebateConfig) -> list[dict[str, str]]:
    """The judge's only message (no system prompt, as in DyLAN): numbered solutions, pick the best two."""
    listed = "".join(RANKED_SOLUTION.format(number, text) for number, text in enumerate(solutions, start=1))
    return [{"role": "user", "content": _opening(cfg) + asked + OTHERS + listed + CHOOSE}]


def _opening(cfg: DebateConfig) -> str:
    return FOLLOW_EXAMPLES if cfg.examples else ""


def _with_system(messages: list[dict[str, str]], cfg: DebateConfig) -> list[dict[str, str]]:
    return [{"role": "system", "content": cfg.system}, *messages] if cfg.system else messages
