"""The report stage: tables, flat metrics and plots."""
