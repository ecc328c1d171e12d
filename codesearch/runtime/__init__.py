"""The Ray layer: a thin shell of actors around the engine (see each module)."""
