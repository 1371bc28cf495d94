"""ProcessBench's critique prompt (QwenLM/ProcessBench, code/run_eval.py `prepare_input_boxed`), with the
template chosen by the dataset's rows.

Two templates are built in, by `steps_format`:
- processbench: `critique_template.txt`, the repository's `code/templates/critique_template.txt` byte for byte
  (commit e802463), which asks about "a math problem";
- deltabench: `deltabench_critique_template.txt`, the template the DeltaBench write-up quotes (its
  deltabench_processbench.py README): ProcessBench's with "a problem", "[Problem]", no blank line under the
  two headers and no "(which typically denotes ...)" aside, since DeltaBench mixes math, code, physics and
  general reasoning. The write-up shows the prompt as sent, "\\boxed{}"; the file escapes it for str.format.

As the original does, the template is read and stripped, the steps are tagged
"<paragraph_i>\\n{step}\\n</paragraph_i>\\n\\n" (indexed from 0) and the tagged text is stripped, and the
template is filled with str.format: so its "\\boxed{{}}" reads "\\boxed{}". Only the template is parsed
for braces, never the problem or the steps. The prompt is one user message, with no system prompt.

`critique.template` may hold another template's text (stripped and filled the same way), for every dataset;
null is the dataset's built-in file.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

from tracevote.core.config_datasets import StepsFormat
from tracevote.core.errors import ConfigError

CRITIQUE = "critique"  # the kind of call, for the simulated model
BUILTIN_TEMPLATES: dict[StepsFormat, Path] = {
    "processbench": Path(__file__).with_name("critique_template.txt"),
    "deltabench": Path(__file__).with_name("deltabench_critique_template.txt"),
}
FIELDS = ("problem", "tagged_response")


_TAGGED_STEP = re.compile(r"<paragraph_(\d+)>\n(.*?)\n</paragraph_\1>", re.DOTALL)


def load_template(path: Path) -> str:
    """The template as the original uses it (stripped); a user's template must hold both fields."""
    try:
        template = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the critique template ({exc})") from exc
    return checked_template(template, str(path))


def critique_template(text: str | None, steps_format: StepsFormat) -> str:
    """`critique.template`'s text, or when it is null the built-in template of the dataset's rows:
    (None, "deltabench") -> DeltaBench's "The following is a problem and a solution ..."."""
    if text is not None:
        return checked_template(text, "critique.template")
    return load_template(BUILTIN_TEMPLATES[steps_format])


def checked_template(text: str, where: str) -> str:
    """The stripped template, once it holds both fields and fills without a brace error."""
    template = text.strip()
    missing = [name for name in FIELDS if "{" + name + "}" not in template]
    if missing:
        raise ConfigError(f"{where}: the critique template lacks {{{missing[0]}}}")
    try:
        template.format(problem="", tagged_response="")
    except (IndexError, KeyError, ValueError) as exc:
        raise ConfigError(f"{where}: the critique template does not fill with str.format ({exc!r}); write a "
                          f"literal brace as {{{{ or }}}}") from exc
    return template


def tagged_response(steps: Sequence[str]) -> str:
    """'<paragraph_0>\\nfirst\\n</paragraph_0>\\n\\n<paragraph_1>\\nsecond\\n</paragraph_1>'."""
    return "".join(f"<paragraph_{i}>\n{step}\n</paragraph_{i}>\n\n" for i, step in enumerate(steps)).strip()


def critique_messages(template: str, problem: str, steps: Sequence[str]) -> list[dict[str, str]]:
    return [{"role": "user", "content": template.format(problem=problem, tagged_response=tagged_response(steps))}]


def steps_in_prompt(prompt: str) -> list[str]:
    """The steps a critique prompt shows, read back from their tags (what the simulated model reads)."""
    return [step for _, step in _TAGGED_STEP.findall(prompt)]


def steps_digest(steps: Sequence[str]) -> str:
    """Names a solution by its steps: the simulated model looks its first error up by this."""
    return hashlib.sha256("\x00".join(steps).encode()).hexdigest()
