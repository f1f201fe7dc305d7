"""qsrank's library: rank-based losses, exact loss-augmented inference, structured SVM
solvers and estimators, metrics, data readers and (with the torch extra) rank losses for deep
nets.

Computation, not a command line: it never imports ``qsrank``; the few modules that write
files or draw progress are named in docs/architecture.md.
"""
