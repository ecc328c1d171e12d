"""``serve delete`` lets the requests being answered finish with their searchers (issue 30): Serve
stops every replica of an application at once, so the runtime replica waits for the HTTP
replicas to stop (`drain.wait_while_deleted`) before it stops the searchers they search with.

A small application on the session's Serve, shaped like ours: a runtime deployment (named as
ours, `RUNTIME_DEPLOYMENT`) whose stop writes down when it would stop the searchers, and an HTTP
deployment whose request takes `SLOW_S`. The application is deleted while a request runs: the
request is answered in full, and the runtime stopped after the HTTP replica had."""

from __future__ import annotations

import json
import threading
import time
import uuid

import httpx

from codesearch.serving.serve_settings import RUNTIME_DEPLOYMENT

#: Seconds the slow request takes (the delete comes in the middle of it).
SLOW_S = 4.0


def _application(record: str, graceful_s: float):
    from ray import serve

    from codesearch.serving.drain import wait_while_deleted

    @serve.deployment(name=RUNTIME_DEPLOYMENT, graceful_shutdown_timeout_s=60)
    class Runtime:
        def __init__(self) -> None:
            self.app = serve.get_replica_context().app_name

        def __del__(self) -> None:  # what `bootstrap.RuntimeOwner.stop` does before it stops the searchers
            waited = wait_while_deleted(self.app, 30)
            with open(record, "a") as f:
                f.write(json.dumps({"runtime_stopped": time.time(), "waited": waited}) + "\n")

    @serve.deployment(name="api", graceful_shutdown_timeout_s=graceful_s, graceful_shutdown_wait_loop_s=0.2)
    class Api:
        def __init__(self, runtime) -> None:
            self.runtime = runtime

        async def __call__(self, request) -> dict:
            import asyncio

            await asyncio.sleep(SLOW_S)
            with open(record, "a") as f:
                f.write(json.dumps({"answered": time.time()}) + "\n")
            return {"ok": True}

    return Api.bind(Runtime.bind())


def test_serve_delete_stops_the_runtime_after_the_requests_being_answered(serve_url, tmp_path):
    from ray import serve

    record = tmp_path / "record.jsonl"
    name = f"cs-delete-{uuid.uuid4().hex[:8]}"
    serve.run(_application(str(record), graceful_s=30), name=name, route_prefix=f"/{name}")
    result: dict = {}

    def slow() -> None:
        result["r"] = httpx.get(f"{serve_url}/{name}", timeout=60)

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(1.0)  # the request is in the replica now
    serve.delete(name)  # blocks until every replica stopped
    t.join(timeout=60)
    assert result["r"].status_code == 200 and result["r"].json() == {"ok": True}
    events = [json.loads(line) for line in record.read_text().splitlines()]
    answered = next(e["answered"] for e in events if "answered" in e)
    stopped = next(e for e in events if "runtime_stopped" in e)
    assert stopped["waited"] is True and stopped["runtime_stopped"] >= answered, events
