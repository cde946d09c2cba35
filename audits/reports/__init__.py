"""Reports built from a run directory: summary tables, HTML and Markdown, exports, queries, merges."""
