"""localserve's own admin endpoints: the loaded models (/api/ps), load, unload, pin, stats."""
