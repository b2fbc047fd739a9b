"""Starting localserve at login (service.py, units.py), and the specs that package it
(localserve.spec, for PyInstaller)."""
