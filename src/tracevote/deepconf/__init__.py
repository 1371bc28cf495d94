"""DeepConf (arXiv 2508.15260): trace confidence, scoring, majority and confidence-weighted voting."""
