"""Benchmarks: every speed claim of Switchboard, measured beside a baseline taken in the same run."""
