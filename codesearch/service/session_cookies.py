"""The names a browser session travels under, shared by the auth middleware (`codesearch.service.auth`,
which reads the session and checks CSRF on every request) and the pages (`codesearch.web.sessions`,
which set them): the two must agree, and the middleware sits below the pages.
"""

#: the session cookie (an opaque random id; the session itself is a row of the store)
SESSION_COOKIE = "codesearch_session"
#: the double-submit CSRF cookie, echoed in `CSRF_HEADER` (API calls) or `CSRF_FORM_FIELD` (forms)
CSRF_COOKIE = "codesearch_csrf"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FORM_FIELD = "csrf_token"
#: methods that change nothing: CSRF is not checked for them
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
