"""The `qsrank` command line: thin wrappers that parse options and call `pipelines`."""
