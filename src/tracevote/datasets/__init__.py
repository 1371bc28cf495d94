"""Problems: fetching a dataset, normalizing it, and reading the normalized file back."""
