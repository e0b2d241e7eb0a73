"""A small stand-in for the Hugging Face Hub's HTTP API, on 127.0.0.1, for push tests.

What it is: the handful of endpoints that `huggingface_hub` (2.4) calls when our code and
keras-hub push a folder — create a repository, ask whether a file exists, ask how to upload
files ("preupload"), and commit them — answering in the shapes the library parses, keeping the
committed files in memory and logging every request (method, path, whether it carried the
expected bearer token).

The card check (`/api/validate-yaml`, which the library calls before uploading a README.md)
accepts any card whose front matter is a YAML mapping: the Hub's own metadata schema is not
applied.

What a test against it proves: our code reaches the network through the real libraries
(`huggingface_hub.HfApi`, `keras_hub.upload_preset`) with the repository ids, files, model card
and credentials we intend, and the library accepts the replies.

What it does not prove: that the real Hub accepts these pushes. It answers "regular" for every
file, so the large-file path (Xet/LFS storage, which the real Hub uses for weights) is never
exercised; it checks no repository permissions, names or card YAML; its replies follow the
library's parsing code, not a Hub specification. No real push was tried from here.

Pointing the library here: `huggingface_hub` reads HF_ENDPOINT once, when it is imported, into
several module constants. So this plugin sets HF_ENDPOINT for the whole test session when it
is loaded (before any test imports the library) to a loopback port that the `hub` fixture
serves: the library is pointed here the way a user points it elsewhere, and a test that
reaches the Hub by mistake meets a closed loopback port, never the internet.

Usage:
    def test_x(hub):                      # fixture: server + HF_TOKEN for the test
        ...push...
        assert hub.files("org/name")["README.md"].startswith(b"---")
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import threading

import pytest
import yaml

from tests.support import pods

TOKEN = "hf_standin_test_token"


PORT = pods.free_port()
ENDPOINT = f"http://127.0.0.1:{PORT}"
os.environ["HF_ENDPOINT"] = ENDPOINT  # see the module docstring


class HubState:
    def __init__(self):
        self.repos: dict[str, dict[str, bytes]] = {}
        self.requests: list[dict] = []
        self.cards_checked = 0
        self.lock = threading.Lock()

    def files(self, repo_id: str) -> dict[str, bytes]:
        return dict(self.repos[repo_id])


class _Handler(http.server.BaseHTTPRequestHandler):
    state: HubState  # set on the subclass made per server
    base: str

    def log_message(self, *args):  # quiet: the state keeps the log
        pass

    def _reply(self, status: int, body=None, headers=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        headers = {
            "Content-Type": "application/json",
            "Content-Length": str(len(data)),
            **(headers or {}),
        }  # a HEAD reply gives the file's length
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _record(self) -> bool:
        authorized = self.headers.get("Authorization") == f"Bearer {TOKEN}"
        with self.state.lock:
            self.state.requests.append(
                {"method": self.command, "path": self.path, "authorized": authorized}
            )
        return authorized

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_HEAD(self):
        self._record()
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return self._reply(404, headers={"X-Error-Code": "RepoNotFound"})
        repo_id, name = "/".join(parts[:2]), "/".join(parts[4:])
        files = self.state.repos.get(repo_id)
        if files is None:
            return self._reply(404, headers={"X-Error-Code": "RepoNotFound"})
        if name not in files:
            return self._reply(404, headers={"X-Error-Code": "EntryNotFound"})
        etag = hashlib.sha1(files[name]).hexdigest()
        self._reply(
            200,
            headers={
                "ETag": f'"{etag}"',
                "X-Repo-Commit": "0" * 40,
                "Content-Length": str(len(files[name])),
            },
        )

    do_GET = do_HEAD  # nothing here downloads; a GET is answered like the HEAD

    def do_POST(self):
        if not self._record():
            self._body()
            return self._reply(401, {"error": "Invalid credentials in Authorization header"})
        path = self.path.split("?")[0]
        body = self._body()
        if path == "/api/repos/create":
            return self._create(json.loads(body))
        if path == "/api/validate-yaml":
            return self._validate_yaml(json.loads(body)["content"])
        parts = path.strip("/").split("/")  # api models ORG NAME preupload|commit REV
        if len(parts) >= 6 and parts[:2] == ["api", "models"]:
            repo_id = f"{parts[2]}/{parts[3]}"
            if repo_id not in self.state.repos:
                return self._reply(
                    404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
                )
            if parts[4] == "preupload":
                return self._preupload(json.loads(body))
            if parts[4] == "commit":
                return self._commit(repo_id, body)
        self._reply(404, {"error": f"the stand-in Hub does not serve {path}"})

    def _create(self, payload: dict):
        repo_id = f"{payload.get('organization')}/{payload['name']}"
        with self.state.lock:
            if repo_id in self.state.repos:
                # The library reads "url" from this reply too (create_repo, exist_ok=True).
                return self._reply(
                    409,
                    {
                        "error": "You already created this model repo",
                        "url": f"{self.base}/{repo_id}",
                    },
                )
            self.state.repos[repo_id] = {}
        self._reply(200, {"url": f"{self.base}/{repo_id}", "name": repo_id})

    def _validate_yaml(self, content: str):
        with self.state.lock:
            self.state.cards_checked += 1
        parts = content.split("---\n", 2)
        try:
            meta = yaml.safe_load(parts[1]) if content.startswith("---\n") else None
        except yaml.YAMLError as err:
            meta = str(err)
        if not isinstance(meta, dict):
            return self._reply(400, {"errors": [{"message": "no YAML mapping front matter"}]})
        self._reply(200, {"errors": [], "warnings": []})

    def _preupload(self, payload: dict):
        # Every file "regular": its bytes travel inside the commit (see the module docstring).
        files = [
            {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None}
            for f in payload["files"]
        ]
        self._reply(200, {"files": files})

    def _commit(self, repo_id: str, body: bytes):
        added = {}
        for line in body.decode().splitlines():
            item = json.loads(line)
            if item["key"] == "file":
                value = item["value"]
                added[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] != "header":
                return self._reply(400, {"error": f"stand-in Hub: no {item['key']} support"})
        with self.state.lock:
            self.state.repos[repo_id].update(added)
        oid = hashlib.sha1(body).hexdigest()
        self._reply(200, {"commitUrl": f"{self.base}/{repo_id}/commit/{oid}", "commitOid": oid})


class StandInHub:
    """The server in a thread; `url` is its endpoint, `state` what it received."""

    def __init__(self):
        self.state = HubState()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        handler.base = self.url
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def files(self, repo_id: str) -> dict[str, bytes]:
        return self.state.files(repo_id)

    @property
    def env(self) -> dict[str, str]:
        """What points a subprocess's `huggingface_hub` here, as a user would point it."""
        return {"HF_ENDPOINT": self.url, "HF_TOKEN": TOKEN, "HF_HUB_DISABLE_TELEMETRY": "1"}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub(monkeypatch):
    """A fresh stand-in Hub at ENDPOINT, and HF_TOKEN set for the test."""
    import huggingface_hub
    from huggingface_hub import constants

    assert constants.ENDPOINT == ENDPOINT, "huggingface_hub was imported before this plugin"
    server = StandInHub()
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    assert huggingface_hub.get_token() == TOKEN
    yield server
    server.close()
