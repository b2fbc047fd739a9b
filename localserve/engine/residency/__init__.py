"""The daemon's residency: which models are loaded where, the memory pools, placement, and the
Loader seam the manager loads through."""
