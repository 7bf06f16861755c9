"""Attaching to running jobs: capture from profiler servers, and following a growing logdir."""
