"""What paid calls leave on disk: append-only frame logs, the sample codec, pools and interchange."""
