"""What `make demo` and `make try` do with the lists of the user's params.yaml that name datasets (and the models a
study compares): each method's lists are mapped to the datasets the demo runs on (tracevote.cli.demo); a live run
and a study are set aside, emptied in the scratch copy, and said so in one line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Every list of dataset names params.yaml may hold (tests/cli/test_demo_user_params.py finds them in the config
# classes): each method's the demo maps to the datasets it runs on; a live run (it needs a server: make real runs
# one) and a study (it compares models' real pools) it sets aside, emptied in the scratch copy and said so.
MAPPED_LISTS = (("deepconf", "datasets"), ("debate", "datasets"), ("debate", "contest_halves"),
                ("critique", "datasets"))
SET_ASIDE_LISTS = (("online", "live", "datasets"), ("study", "datasets"))
OTHER_MODELS = ("deepconf", "endpoints")  # the models a study compares beside deepconf.endpoint: set aside with it

def set_aside_lists(params: dict[str, Any]) -> dict[tuple[str, ...], list[str]]:
    """The lists of SET_ASIDE_LISTS that name any dataset in the user's params, with their names."""
    found = {}
    for keys in SET_ASIDE_LISTS:
        names = nested_get(params, keys)
        if names:
            found[keys] = [str(name) for name in names]
    return found


def set_aside_overrides(params: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """What the demo sets aside of the user's params ("study.datasets [aime_2025]", ...) and the overrides that empty
    it: the lists of SET_ASIDE_LISTS; the study's K (each must be one of eval.k, which the demo sets); the other
    models of deepconf.endpoints, which only a study reads (their sim: keys go too: check_params refuses one on an
    endpoint that is not among them)."""
    found = set_aside_lists(params)
    overrides: dict[str, Any] = {}
    for keys in found:
        overrides = deep_merge(overrides, nested(keys, []))
    if (params.get("study") or {}).get("k"):
        overrides = deep_merge(overrides, {"study": {"k": []}})
    models = [str(key) for key in (params.get("deepconf") or {}).get("endpoints") or []]
    if models:
        found[OTHER_MODELS] = models
        overrides = deep_merge(overrides, {"deepconf": {"endpoints": []},
                                           "endpoints": {key: {"sim": None} for key in models}})
    return [f"{'.'.join(keys)} [{', '.join(names)}]" for keys, names in found.items()], overrides


def nested_get(params: Any, keys: tuple[str, ...]) -> Any:
    """params[a][b][c] for ("a", "b", "c"), or [] when a section on the way is absent (study: is optional)."""
    for key in keys:
        params = params.get(key) if isinstance(params, Mapping) else None
        if params is None:
            return []
    return params


def nested(keys: tuple[str, ...], value: Any) -> dict[str, Any]:
    """("study", "datasets"), [] -> {"study": {"datasets": []}}."""
    return {keys[0]: value if len(keys) == 1 else nested(keys[1:], value)}


def set_aside_line(set_aside: list[str]) -> str:
    """The one line saying which lists of the user's params the demo emptied, or "" when none."""
    if not set_aside:
        return ""
    return (f"demo: set aside {', '.join(set_aside)} of your params.yaml: the demo runs every method on one "
            f"simulated model, with no live run and no study")


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """{"a": {"b": 1, "c": 2}} merged with {"a": {"c": 3}} -> {"a": {"b": 1, "c": 3}}."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and value and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
