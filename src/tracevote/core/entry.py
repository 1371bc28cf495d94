"""How every entry point (stage scripts and the CLI) reports a user-facing error: one message, exit 2."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from tracevote.core.errors import TracevoteError
from tracevote.core.hosts import redact_urls

# A folder: each stage run under DVC writes there the params keys it read (<stage>.json), for the test that
# compares them with dvc.yaml's declarations (tests/test_stage_params.py).
PARAMS_READS_ENV = "TRACEVOTE_PARAMS_READS"


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
                _run_noting_reads(main, stage, os.environ.get(PARAMS_READS_ENV))
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


def _run_noting_reads(main: Callable[[], object], stage: str, folder: str | None) -> None:
    """main(); with `folder` set, the params keys it read are written to <folder>/<stage>.json after it ran."""
    if not folder:
        main()
        return
    from tracevote.core.names import inside
    from tracevote.core.reads import recording_reads

    with recording_reads() as reads:
        main()
    Path(folder).mkdir(parents=True, exist_ok=True)
    inside(Path(folder), stage, ".json").write_text(json.dumps({"stage": stage, "reads": sorted(reads)}))
