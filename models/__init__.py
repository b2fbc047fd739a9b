"""The catalog data (catalog.toml); installed as the package `localserve.models`."""
