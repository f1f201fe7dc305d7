"""qsrank's library: rank-based losses, exact loss-augmented inference, and (to come) solvers.

Pure computation: nothing here writes files or prints.
"""
