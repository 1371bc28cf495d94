"""Stage aggregate: the score table -> accuracy of every method at every K, over seeded repeats, with
bootstrap intervals and paired comparisons against Cons@K; online DeepConf replayed from the stop table.

Reads only the score and stop tables, never the pool.
"""

import argparse

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.fileio import write_json
from tracevote.core.parquet import read_parquet, read_parquet_metadata
from tracevote.deepconf.evaluate import aggregate
from tracevote.deepconf.signals import table_signal, table_top_k
from tracevote.deepconf.stop_table import StopTable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--scores", required=True)
    parser.add_argument("--stops", required=True, help="the score stage's stop table")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    params = load_params(args.params)
    metadata = read_parquet_metadata(args.scores)
    result = aggregate(read_parquet(args.scores), params.eval, online=params.online, stops=StopTable.read(args.stops),
                       signal=table_signal(metadata), top_k=table_top_k(metadata))
    simulated = metadata.get("simulated") == "true"
    write_json(args.out, {"simulated": simulated, "pool": metadata.get("pool"), "model": metadata.get("model"),
                          "group_size": metadata.get("group_size"), "token_signal": table_signal(metadata),
                          "top_k": metadata.get("top_k", "null"), "result": result.to_json()})
    print(f"aggregate: {len(result.methods)} methods x {len(result.k)} K x {result.repeat} repeats, "
          f"{len(result.online_methods)} online methods, {result.bootstrap} bootstrap resamples -> {args.out}"
          + (" (SIMULATED model)" if simulated else ""))


if __name__ == "__main__":
    stage_main(main)
