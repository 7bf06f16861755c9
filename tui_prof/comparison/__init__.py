"""Comparing an experiment's variants: statistics, t/F quantiles, verdicts, the apples-to-apples
guard and the report both faces print. Pure functions over stored runs; no UI, no frameworks.
"""
