"""The config file (Sourcebot's schema), search contexts and environment variables."""
