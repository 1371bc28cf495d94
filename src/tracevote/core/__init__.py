"""What every layer shares: params.yaml's typed views, user-facing errors, atomic files, DVC state."""
