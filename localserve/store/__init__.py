"""The store: turning a model name into a file on disk."""
