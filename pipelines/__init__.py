"""One module per paper experiment: each reads a config, runs, and writes results/."""
