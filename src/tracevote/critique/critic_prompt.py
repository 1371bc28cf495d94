"""The grading critic's prompt (tracevote.grading.critic sends it) and how its reasoning is read back.

Here, beside the methods' prompts, because the simulator (a layer below grading) parses it to answer critic calls.
"""

from __future__ import annotations

import hashlib
import re

CRITIC = "critic"  # the kind of call, for the simulated model
PROMPT_VERSION = 1  # bump with any change to CRITIC_TEMPLATE's wording (it is hashed into the setting anyway)
CRITIC_TEMPLATE = """You are grading the reasoning a model wrote while solving a math problem.

<problem>
{problem}
</problem>

<reference_solution>
{reference}
</reference_solution>

<model_reasoning>
{reasoning}
</model_reasoning>

Score the model's reasoning from 1 to 5 against the reference solution:
5 = excellent reasoning, well aligned with the reference solution;
3 = partially correct reasoning with some issues;
1 = mostly incorrect or incoherent reasoning.
Use 2 and 4 for reasoning in between. Reply with a JSON object only, such as {{"score": 4}}."""
_REASONING = re.compile(r"<model_reasoning>\n(.*)\n</model_reasoning>", re.DOTALL)


def critic_messages(problem: str, reference: str, reasoning: str) -> list[dict[str, str]]:
    """One user message; the reasoning is the prediction's `thinking`, whole."""
    content = CRITIC_TEMPLATE.format(problem=problem.strip(), reference=reference.strip(),
                                     reasoning=reasoning.strip())
    return [{"role": "user", "content": content}]


def reasoning_in_prompt(prompt: str) -> str | None:
    """The reasoning a critic prompt shows (what the simulated model reads back)."""
    match = _REASONING.search(prompt)
    return match.group(1) if match else None


def reasoning_digest(reasoning: str) -> str:
    """Names a reasoning as a critic prompt shows it (stripped): the simulated critic looks it up by this."""
    return hashlib.sha256(reasoning.strip().encode()).hexdigest()
