"""The ground floor: what every layer shares, importing nothing of localserve.

Errors, sampling parameters, a model's identity and facts, the step plan, units and settings.
"""
