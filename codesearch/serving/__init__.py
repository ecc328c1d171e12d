"""Serving: how the app is put together and run on Ray Serve, from start to stop.

- `api.py`: `build_app`, the one FastAPI app of a replica (the HTTP routes and middleware of
  `codesearch.service`, the MCP server, the web UI of `codesearch.web`);
- `deployment.py`: the ``codesearch-api`` Serve deployment around it (drain gate, settings);
- `bootstrap.py`: the ``codesearch-runtime`` deployment that owns the runtime actors, and the
  `ServiceSpec` both deployments are built from;
- `spec.py`: `ServiceArgs`, the service's typed arguments, and `spec_from`, the one way both front
  doors turn them (and the environment) into a `ServiceSpec`;
- `launcher.py`: ``codesearch serve`` (start Ray or join a cluster, deploy, wait, stop);
- `app_builder.py`: the same application for ``serve run`` / ``serve deploy`` (Serve's typed
  application builder over `ServiceArgs`), and the ``shutdown`` / ``status`` commands;
- `stop.py`: the one stop of both (drain, delete, wait for the runtime's actors to end);
- `drain.py`: stopping without losing a request; `serve_settings.py`: Serve's switches and names;
- `proxy_errors.py`: what Serve's proxy answers when no replica can; `lazy_receive.py`: a replica asks
  the proxy for a request's messages only when the app reads them; `demo.py`: the offline demo.

This package sits on top: it imports the service, the web UI and the runtime; none of them imports it.
"""
