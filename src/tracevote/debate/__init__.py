"""DyLAN debate (arXiv 2310.02170): its prompts, the procedure, importance, results and metrics."""
