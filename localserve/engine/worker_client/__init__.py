"""The daemon's end of the engine workers: their supervisor (the daemon's Loader), its
connection to one worker, the remote model handle and its request streams, the probe."""
