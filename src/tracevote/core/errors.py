"""Errors a user can act on. Entry points print them without a traceback and exit non-zero."""


class TracevoteError(Exception):
    """Base for every error whose message alone tells the user what went wrong and where."""


def listed(problems: list[str], limit: int = 20) -> str:
    """Problems one per indented line, the first `limit` of them and how many more."""
    more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
    return "\n  ".join(problems[:limit]) + more


class ConfigError(TracevoteError):
    """params.yaml (or a flag) holds a value the tool cannot use."""


class DataError(TracevoteError):
    """An input file or record is malformed; the message names the file, row and field."""


class FetchError(TracevoteError):
    """A dataset could not be downloaded."""


class FatalAPIError(TracevoteError):
    """A response no retry can fix (bad key, no balance, unknown model, bad parameters)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class QuotaError(FatalAPIError):
    """The account is out of quota or balance (402, OpenAI's insufficient_quota): no call can succeed until it is
    topped up, so the run stops at once."""


class ContextLengthError(FatalAPIError):
    """The server refused one request as longer than the model's context window (OpenAI's, DeepSeek's, vLLM's and
    llama.cpp's 400s saying "maximum context length"): that call fails, not the run, as no retry can shorten it.
    `simulated`: tracevote's simulator refused it (its ledger record is then a simulated one)."""

    def __init__(self, message: str, status: int, *, simulated: bool = False) -> None:
        super().__init__(message, status)
        self.simulated = simulated


class EndpointError(TracevoteError):
    """The endpoint could not be reached, or kept failing until its retries ran out."""


class EndpointNotFoundError(FatalAPIError):
    """The URL answered 404 without mentioning the model: model.base_url points at the wrong path."""


class ModelNotFoundError(FatalAPIError):
    """The server is there but does not serve model.name."""


class StorageError(TracevoteError):
    """A write to the project's disk failed (no space left, a file size limit, a read-only folder): the
    message names the path and the free space; the stage stops sending requests at once."""


class DamagedLogError(DataError):
    """A ledger log holds a bad frame before its end (not a torn tail a kill can leave): the message names
    the file, the frame and the repair command."""


class ReasoningBudgetError(TracevoteError):
    """A reasoning model spent a reply's whole token budget on hidden reasoning and returned no answer: the message
    names the budget, the effort, what to raise and what the reply cost. Every reply at that setting would end the
    same way, so the run stops (the calls in flight land first) and nothing of it is kept: a rerun asks again."""
