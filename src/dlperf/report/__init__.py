"""Reports: the run table and the study reports as sections (given their data, never reading the store),
their terminal and Markdown renderers, comparisons and plots."""
