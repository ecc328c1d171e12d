"""Code hosts against local servers of their REST APIs, git reads and mirrors over smart HTTP."""
