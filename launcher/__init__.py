"""Placement and the command line: where processes run and how a user starts a run."""
