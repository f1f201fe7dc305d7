"""One module per paper experiment: each reads a config, runs, and writes its run directory
(under runs/ unless told where)."""
