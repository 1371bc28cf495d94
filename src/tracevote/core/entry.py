"""How every entry point (stage scripts and the CLI) reports a user-facing error: one message, exit 2."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from tracevote.core.errors import TracevoteError
from tracevote.core.hosts import redact_urls


def stage_main(main: Callable[[], object]) -> None:
    """Run an entry point; a TracevoteError prints `error: <message>` and exits 2, with no traceback.

    Under DVC (which names the running stage in DVC_STAGE), an offline stage fails only on the problems of
    params.yaml in the keys it declares; check_params and the paid stages (config.check_params) on them all."""
    stage = os.environ.get("DVC_STAGE")
    try:
        if stage:
            from tracevote.core.config import stage_declaring
            from tracevote.core.stage_params import declared_params

            with stage_declaring(lambda: declared_params(stage)):
                main()
        else:
            main()
    except TracevoteError as exc:
        print(f"error: {redact_urls(str(exc))}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:
        # the reader went away (`... | head`): stop quietly, and keep Python from complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(141) from None
