"""The web pages, sign-in and single sign-on, in-process and in Chromium."""
