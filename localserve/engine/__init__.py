"""The engine: residency, scheduling and the per-device loop. It knows nothing of HTTP."""
