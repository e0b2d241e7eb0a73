"""A recording stand-in for Kaggle's API on localhost:7777, for the Kaggle push test.

kagglehub has no endpoint setting; its environment switch `KAGGLE_API_ENVIRONMENT=TEST`
points it at http://localhost:7777. This server logs each request (path, and whether it
carried the test credentials as HTTP basic auth) and answers every one with 503.

What a test against it proves: `keras_hub.upload_preset("kaggle://...")` reaches the network
through kagglehub with our handle and the credentials kagglehub found, and its failure comes
back to the user as one line. What it does not prove: anything about a successful Kaggle
upload (no Kaggle API is implemented here; no real push was tried).
"""

from __future__ import annotations

import base64
import http.server
import threading

import pytest

PORT = 7777  # kagglesdk's KaggleEnv.TEST endpoint
USERNAME, KEY = "standin-user", "standin-key"


class _Handler(http.server.BaseHTTPRequestHandler):
    requests: list  # set on the subclass made per server

    def log_message(self, *args):
        pass

    def _answer(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        basic = "Basic " + base64.b64encode(f"{USERNAME}:{KEY}".encode()).decode()
        self.requests.append(
            {
                "method": self.command,
                "path": self.path,
                "body": body,
                "authorized": self.headers.get("Authorization") == basic,
            }
        )
        body = b'{"error": "stand-in Kaggle: no API here"}'
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _answer


@pytest.fixture
def kaggle(monkeypatch):
    """The recorder, and kagglehub pointed at it with test credentials; its request log."""
    handler = type("Handler", (_Handler,), {"requests": []})
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), handler)
    except OSError:
        pytest.skip(f"port {PORT} (kagglesdk's TEST endpoint) is in use")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    for name, value in {
        "KAGGLE_API_ENVIRONMENT": "TEST",
        "KAGGLE_USERNAME": USERNAME,
        "KAGGLE_KEY": KEY,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("KAGGLE_API_TOKEN", raising=False)
    yield handler.requests
    server.shutdown()
    server.server_close()
