"""sitebench's own performance suite (``./sitebench perf``): ratios measured side by side."""
