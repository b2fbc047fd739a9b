"""The engine worker process (one per device): its main loop, the device loop that steps every
resident model, and the runtime table that builds a model from its file."""
