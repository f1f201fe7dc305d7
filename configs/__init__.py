"""The default config of each experiment, shipped as package data (`qsrank train NAME`)."""
