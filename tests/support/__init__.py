"""Test helpers that carry the discipline: real servers on free ports, processes stopped by pid
or process group (never by name), and polling with `wait_until` instead of sleeping.

Nothing here depends on pytest, so the same helpers serve fixtures, scripts and benchmarks.
"""
