"""Stage check_params: read and validate every key of params.yaml, including keys no other stage declares.

Its only dependency is the whole params.yaml, so any edit re-runs it (in well under a second) and a
typo such as `pool.concurency` fails `dvc repro` with the list of known keys. It reports every problem of
the file in one run, one line each (every paid stage refuses the same; the offline stages fail only on the keys
they declare). It writes nothing, so no other stage depends on it and it never makes one re-run.
"""

import argparse
from pathlib import Path

from tracevote.core.config import check_params
from tracevote.core.entry import stage_main
from tracevote.core.errors import ConfigError
from tracevote.core.inputs import local_sources, output_sources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    # a source that a stage would write over comes first, then every other problem of the file
    clashing = output_sources(local_sources(Path(args.params)), Path.cwd(), Path(args.params))
    try:
        params = check_params(args.params)
    except ConfigError as exc:
        raise ConfigError("\n".join([*clashing, str(exc)])) from None
    if clashing:
        raise ConfigError("\n".join(clashing))
    print(f"check_params: {args.params} is valid ({len(params.datasets)} datasets; DeepConf on "
          f"{', '.join(params.deepconf.datasets)}; backend {params.model.backend})")
    for method, model in (("DeepConf pool", params.deepconf_model), ("debate agents", params.debate_model),
                          ("debate judge", params.judge_model), ("critique", params.critique_model),
                          ("grading critic", params.critic_model)):
        print(f"  {method}: {model.describe()}")


if __name__ == "__main__":
    stage_main(main)
