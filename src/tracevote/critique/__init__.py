"""Step-level critique (ProcessBench): find the earliest wrong paragraph of a solution, by majority vote."""
