"""The revisions, oldest first: r0001_baseline (the schema before migrations), then one module each."""
