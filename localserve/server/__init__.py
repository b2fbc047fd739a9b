"""The aiohttp daemon: one module per API face, translating wire formats to engine calls."""
