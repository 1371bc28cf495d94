"""Stage check_params: read and validate every key of params.yaml, including keys no other stage declares.

Its only dependency is the whole params.yaml, so any edit re-runs it (in well under a second) and a
typo such as `pool.concurency` fails `dvc repro` with the list of known keys. It reports every problem of
the file in one run, one line each (every paid stage refuses the same; the offline stages fail only on the keys
they declare). It writes nothing, so no other stage depends on it and it never makes one re-run.
"""

import argparse

from tracevote.core.config import check_params
from tracevote.core.entry import stage_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = check_params(args.params)  # a source a stage would write over first, then every other problem
    print(f"check_params: {args.params} is valid ({len(params.datasets)} datasets; DeepConf on "
          f"{', '.join(params.deepconf.datasets)}; backend {params.model.backend})")
    for method, model in (("DeepConf pool", params.deepconf_model), ("debate agents", params.debate_model),
                          ("debate judge", params.judge_model), ("critique", params.critique_model),
                          ("grading critic", params.critic_model)):
        print(f"  {method}: {model.describe()}")


if __name__ == "__main__":
    stage_main(main)
