"""Reports read from the store: terminal tables, Markdown, comparisons."""
