"""Kinds of call the simulated model answers, told apart by a marker and never by reading the prompt.

A method's prompt builder names the kind of each call (tracevote.sampling.prompts.Prompt.kind); the client
sends it in the X-Tracevote-Kind header (real servers ignore it); the sim server looks the kind up here and
hands the checked request to its responder. A request without the header is a "solve" call, so old clients
and curl get what they always got. Every responder answers deterministically, seeded by (cfg.seed, the model's
name, the call key), as solve does.

The built-in kinds are listed in BUILT_IN below, one line per kind, from modules that import nothing of this
one or of model.py (no registration by import side effect, no import circle). A test or an extension adds a
kind at run time:

    def echo(req, key, model, *, degrade):
        ...
    register_kind("echo", echo)
"""

from __future__ import annotations

import re
from collections.abc import KeysView
from typing import TYPE_CHECKING, Protocol

from tracevote.core.simulated import SOLVE
from tracevote.critique.critic_prompt import CRITIC
from tracevote.critique.prompts import CRITIQUE
from tracevote.debate.prompts import ANSWER, RANK, REVISE
from tracevote.sim.critic import critic_reply
from tracevote.sim.critique import critique_reply
from tracevote.sim.debate import answer_reply, rank_reply, revise_reply
from tracevote.sim.render import Degrade
from tracevote.sim.request import SimRequest, SimRequestError

if TYPE_CHECKING:
    from tracevote.sim.model import SimModel

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")  # fits an HTTP header value as is


class Responder(Protocol):
    """The response body for one checked request. `key` is the call key the server got (None: no header);
    `degrade` is the fault mode the server asks for ("none" outside fault plans)."""

    def __call__(self, req: SimRequest, key: str | None, model: SimModel, *, degrade: Degrade) -> bytes: ...


class UnknownKindError(SimRequestError):
    """A kind no responder is registered for: HTTP 400, naming the kind and the known ones."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"Unknown call kind {kind!r} (header X-Tracevote-Kind); this simulator knows: "
                         f"{', '.join(sorted(_RESPONDERS))}", 400)
        self.kind = kind


def _solve(req: SimRequest, key: str | None, model: SimModel, *, degrade: Degrade) -> bytes:
    """One reasoning trace that boxes an answer: see model.py for how it is drawn."""
    return model.solve(req, key, degrade=degrade)


BUILT_IN: dict[str, Responder] = {
    SOLVE: _solve,              # DeepConf's traces (and every method's plain solve call)
    ANSWER: answer_reply,       # the debate: an agent's first answer
    REVISE: revise_reply,       # the debate: an agent's answer after reading the others'
    RANK: rank_reply,           # the debate: the judge's ranking of the agents
    CRITIQUE: critique_reply,   # step-level critique: the first wrong step
    CRITIC: critic_reply,       # grading: the LLM critic's verdict on a prediction
}
_RESPONDERS: dict[str, Responder] = dict(BUILT_IN)
KNOWN_KINDS: KeysView[str] = _RESPONDERS.keys()  # a live view: kinds registered later show up in it


def register_kind(name: str, responder: Responder) -> None:
    """Answer calls of kind `name` with `responder`. Registering the same responder again is a no-op;
    another responder for a taken name is a ValueError (two methods claiming one kind)."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"call kind {name!r}: use lower-case letters, digits, '_' and '-', starting with a letter")
    if _RESPONDERS.get(name, responder) is not responder:
        raise ValueError(f"call kind {name!r} already has a responder: {_RESPONDERS[name]!r}")
    _RESPONDERS[name] = responder


def unregister_kind(name: str) -> None:
    """Forget kind `name` (for tests that register a toy kind); the built-in kinds stay."""
    if name in BUILT_IN:
        raise ValueError(f"the built-in kind {name!r} cannot be unregistered")
    _RESPONDERS.pop(name, None)


def responder_for(kind: str) -> Responder:
    try:
        return _RESPONDERS[kind]
    except KeyError:
        raise UnknownKindError(kind) from None

