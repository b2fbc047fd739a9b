"""Each wire body declared once: the fields a face reads, each with its reader and its JSON
Schema, so that the face's validation and /openapi.json are the same declaration."""
