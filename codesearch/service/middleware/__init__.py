"""The service's pure ASGI middleware: what every request passes through before (and after) a route.

In the app, outermost first (`codesearch.serving.api.build_app` adds them):

- `observability`: names and times every request (``X-Request-Id``, the HTTP metrics);
- `allowed_hosts`: only the service's own host names are answered (421 otherwise);
- `security_headers`: ``nosniff`` everywhere, the site's page headers on any HTML that lacks them
  (`security_headers.page_headers` is what `codesearch.web.templating.render` sends);
- `compression`: gzip for what is worth it, never for the streams;
- `limits`: what one request may cost before any route runs (credentials before the body, its
  size and the time it may take to arrive).

In Serve's HTTP proxies (`codesearch.serving.proxy_errors.middlewares`): `observability.ProxyRequestIds`
and `proxy_body.BodyAhead` (a small body travels with the request). The web UI adds its own,
inside these: the browser session (`codesearch.sessions`), IAP and account linking
(`codesearch.web.mount`).

Plain ASGI (``__call__(scope, receive, send)``) rather than Starlette's ``BaseHTTPMiddleware``, so
that a streamed response is passed on as it is written. The package imports nothing; each module
is imported by name.
"""
