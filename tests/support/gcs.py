"""Offline Google Cloud Storage for tests: `gs://` paths served from loopback.

Three small servers run in threads of the test process:

* gcp-storage-emulator (in memory): the GCS JSON API. Beam and google-cloud-storage talk to it
  directly over HTTP because they honour ``STORAGE_EMULATOR_HOST``.
* a fake OAuth token endpoint: credentials are required by Beam's GcsIO (without them it
  retries ``google.auth.default()`` for ~22 s per process) and by TensorFlow's service-account
  flow, so both get a syntactically valid service-account JSON that points here.
* a TLS-terminating CONNECT proxy: TensorFlow's built-in gs:// filesystem has hard-coded
  ``https://*.googleapis.com`` URLs and no endpoint setting, but it honours ``https_proxy`` and
  ``CURL_CA_BUNDLE``. The proxy presents a certificate from a throw-away CA for the Google hosts
  and forwards the decrypted requests to the emulator (or to the token endpoint).

Usage from tests (``pytest_plugins = ["tests.support.gcs"]`` in ``tests/conftest.py``)::

    def test_x(gcs):
        subprocess.run(cmd, env={**os.environ, **gcs.env}, check=True)
        ...gcs.url("data", "part-0.tfrecord")...
"""

from __future__ import annotations

import contextlib
import datetime
import http.client
import http.server
import json
import logging
import os
import ssl
import tempfile
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
PROJECT = "test-project"
FAKE_ACCESS_TOKEN = "offline-test-token"

# The hosts TensorFlow's GCS filesystem (and its OAuth flow) connects to.
GOOGLE_HOSTS = ("www.googleapis.com", "storage.googleapis.com", "oauth2.googleapis.com")

# Per-connection headers must not be relayed: the proxy re-frames every body with its own
# Content-Length, and each side manages its own connection.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "proxy-connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "content-length",
        "proxy-authorization",
    }
)


# --------------------------------------------------------------------------------------------
# gcp-storage-emulator
# --------------------------------------------------------------------------------------------


def _current_generation(storage, bucket: str, name: str | None) -> str:
    from gcp_storage_emulator.exceptions import NotFound

    try:
        return str(storage.get_file_obj(bucket, name).get("generation") or "0")
    except NotFound:
        return "0"  # GCS's "absent"


def _if_generation_match(handler, object_name):
    """GCS's `ifGenerationMatch` precondition (generation 0 = "only if absent"), which the
    emulator ignores: HTTP 412 when the object is at another generation, as GCS answers.
    The emulator serves one request at a time, so check and change are one atomic step."""
    from http import HTTPStatus

    def guarded(request, response, storage):
        wanted = request.query.get("ifGenerationMatch")
        if wanted is not None:
            name = object_name(request)
            if _current_generation(storage, request.params["bucket_name"], name) != wanted[0]:
                response.status = HTTPStatus.PRECONDITION_FAILED
                return None
        return handler(request, response, storage)

    guarded._honours_generation = True
    return guarded


def _upload_name(request):
    name = (request.query.get("name") or [None])[0]
    if name is None and isinstance(request.data, dict):
        name = request.data["meta"].get("name")
    return name


def _honour_generation_on_delete() -> None:
    """The server's route table holds the object handlers themselves: guard DELETE there."""
    from gcp_storage_emulator import server
    from gcp_storage_emulator.handlers import objects

    for _, handlers in server.HANDLERS:
        if handlers.get(server.DELETE) is objects.delete:
            handlers[server.DELETE] = _if_generation_match(
                objects.delete, lambda request: request.params["object_id"]
            )


def _patch_emulator_once() -> None:
    """Make the emulator accept an empty media upload (what ``tf.io.gfile.makedirs`` sends;
    it parses an empty body as None and then fails on ``len(None)``), and honour
    `ifGenerationMatch` on uploads and deletes (the output lock, common/lock_store.py)."""
    from gcp_storage_emulator.handlers import objects

    original = objects._media_upload
    if getattr(original, "_accepts_empty_body", False):
        return

    def media_upload(request, response, storage):
        if request.data is None:
            request._data = b""  # the parsed-body cache behind Request.data
        return original(request, response, storage)

    # insert() looks these up as module globals.
    objects._media_upload = _if_generation_match(media_upload, _upload_name)
    objects._media_upload._accepts_empty_body = True
    objects._multipart_upload = _if_generation_match(objects._multipart_upload, _upload_name)
    _honour_generation_on_delete()
    # Its WARNING-level chatter ("Content handled as string") would bury real errors in
    # pytest's captured-log section.
    logging.getLogger("gcp_storage_emulator").setLevel(logging.ERROR)


def _start_emulator(bucket: str, stack: contextlib.ExitStack) -> int:
    """Starts the emulator on a free port and returns the port.

    Reaches into the emulator's server thread (`_api`, `_httpd`): it has no public way to bind
    port 0 or to run as a daemon. gcp-storage-emulator is pinned in setup.py's test extra.
    """
    from gcp_storage_emulator.server import create_server

    _patch_emulator_once()
    # Port 0 avoids a find-a-free-port race; the bound port is read back below.
    server = create_server(LOOPBACK, 0, in_memory=True, default_bucket=bucket)
    server._api.daemon = True  # a forgotten stop() must not hang interpreter exit
    server.start()
    stack.callback(server.stop)
    httpd = server._api._httpd
    # The emulator serves one request at a time (plain HTTPServer, listen backlog 5). Parallel
    # clients (proxy threads, Beam workers) would overflow that backlog and stall on TCP SYN
    # retries; a deeper queue lets them simply wait their turn.
    httpd.socket.listen(128)
    return httpd.server_port


# --------------------------------------------------------------------------------------------
# Generic threaded loopback servers
# --------------------------------------------------------------------------------------------


class _QuietHandler(http.server.BaseHTTPRequestHandler):
    """Request logging goes to the logging module, not to stderr of the test process."""

    def log_message(self, format, *args):  # noqa: A002 (signature defined by the base class)
        logger.debug("%s: " + format, type(self).__name__, *args)

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _read_chunked(self) -> bytes:
        chunks = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                break
            chunks.append(self.rfile.read(size))
            self.rfile.readline()  # CRLF after each chunk
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(chunks)


def _serve(handler_cls, stack: contextlib.ExitStack, **attrs) -> int:
    """Serves `handler_cls` on a free loopback port in a daemon thread; returns the port.

    `attrs` are set on the server object, where handlers read them as `self.server.<name>`.
    """
    server = http.server.ThreadingHTTPServer((LOOPBACK, 0), handler_cls)
    server.daemon_threads = True  # open keep-alive connections must not block shutdown
    for name, value in attrs.items():
        setattr(server, name, value)
    thread = threading.Thread(target=server.serve_forever, name=handler_cls.__name__, daemon=True)
    thread.start()
    stack.callback(server.server_close)
    stack.callback(server.shutdown)  # runs first (LIFO): stop the loop, then close the socket
    return server.server_address[1]


# --------------------------------------------------------------------------------------------
# Fake OAuth token endpoint
# --------------------------------------------------------------------------------------------


class _TokenHandler(_QuietHandler):
    """Grants a fake access token to any request (JWT grant from google-auth or TensorFlow)."""

    def do_POST(self):
        self.read_body()
        body = json.dumps(
            {"access_token": FAKE_ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer"}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST


def _write_service_account(path: Path, token_uri: str) -> None:
    """A service-account key file: the one credential type both google-auth and TF accept
    offline. Its RSA key is real because both sign a JWT with it before asking for a token."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    info = {
        "type": "service_account",
        "project_id": PROJECT,
        "private_key_id": "offline-test-key",
        "private_key": pem,
        "client_email": f"offline-test@{PROJECT}.iam.gserviceaccount.com",
        "client_id": "1",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,  # google-auth honours it; TF uses googleapis.com (proxied)
    }
    path.write_text(json.dumps(info, indent=1))


# --------------------------------------------------------------------------------------------
# Test certificates
# --------------------------------------------------------------------------------------------


def _certificate(
    subject: str,
    public_key,
    signer_key,
    issuer: str,
    extensions: list[tuple[x509.ExtensionType, bool]],
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))  # tolerate clock skew
        .not_valid_after(now + datetime.timedelta(days=7))
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(signer_key, hashes.SHA256())


def _write_certificates(workdir: Path) -> tuple[Path, Path, Path]:
    """Writes a throw-away CA and a server certificate for GOOGLE_HOSTS signed by it.

    Returns (ca_pem, server_cert_pem, server_key_pem). EC keys: instant to generate.
    """
    ca_name = "gcs-emulator offline test CA"
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _certificate(
        ca_name,
        ca_key.public_key(),
        ca_key,
        ca_name,
        [
            (x509.BasicConstraints(ca=True, path_length=0), True),
            (
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                True,
            ),
            (x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False),
        ],
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(
        GOOGLE_HOSTS[0],
        key.public_key(),
        ca_key,
        ca_name,
        [
            (x509.SubjectAlternativeName([x509.DNSName(h) for h in GOOGLE_HOSTS]), False),
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
            (x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False),
        ],
    )
    paths = workdir / "ca.pem", workdir / "server.pem", workdir / "server.key"
    paths[0].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


# --------------------------------------------------------------------------------------------
# TLS-terminating proxy for TensorFlow
# --------------------------------------------------------------------------------------------


def _relay(port: int, method: str, path: str, body: bytes, headers) -> tuple:
    """Sends one request to a loopback HTTP server; returns (status, reason, headers, body).

    The Host header becomes the emulator's own address: the emulator stores URLs built from
    it in object metadata (mediaLink), which google-cloud-storage later downloads from, so
    they must point at the emulator and not at a googleapis.com host only TF can reach.
    """
    forwarded = {
        k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP and k.lower() != "host"
    }
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=120)
    try:
        # None (not b"") lets http.client decide whether an empty body needs Content-Length: 0.
        connection.request(method, path, body=body or None, headers=forwarded)
        response = connection.getresponse()
        return response.status, response.reason, response.getheaders(), response.read()
    finally:
        connection.close()


def _public_location(location: str, host: str) -> str:
    """The emulator answers resumable-upload starts with an http://127.0.0.1:PORT Location;
    TF must send the data back through the proxy, i.e. over https to the host it used."""
    parts = urllib.parse.urlsplit(location)
    if parts.scheme != "http":
        return location
    return urllib.parse.urlunsplit(("https", host, parts.path, parts.query, parts.fragment))


class _TunnelHandler(_QuietHandler):
    """Serves the decrypted requests of one CONNECT tunnel (curl keeps it alive for reuse)."""

    protocol_version = "HTTP/1.1"

    def _forward(self):
        body = self.read_body()
        host = self.headers.get("Host") or GOOGLE_HOSTS[0]
        hostname = host.partition(":")[0]
        is_token = hostname == "oauth2.googleapis.com" or self.path.startswith("/oauth2/")
        port = self.server.token_port if is_token else self.server.emulator_port
        try:
            status, reason, headers, data = _relay(
                port, self.command, self.path, body, self.headers
            )
        except (OSError, http.client.HTTPException) as error:
            self.send_error(502, f"offline GCS test proxy: upstream failed: {error!r}")
            return
        self.send_response(status, reason)
        for name, value in headers:
            if name.lower() in _HOP_BY_HOP or name.lower() in ("server", "date"):
                continue  # send_response() wrote its own Server/Date
            if name.lower() == "location":
                value = _public_location(value, host)
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _forward


class _ConnectProxyHandler(_QuietHandler):
    """Answers CONNECT for the Google hosts and terminates TLS itself (man-in-the-middle)."""

    def do_CONNECT(self):
        host = self.path.rpartition(":")[0]
        if host not in GOOGLE_HOSTS:
            # Nothing else is reachable offline: refuse at once rather than let a client hang.
            self.send_error(502, f"offline GCS test proxy only serves {', '.join(GOOGLE_HOSTS)}")
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        try:
            tls = self.server.ssl_context.wrap_socket(self.connection, server_side=True)
        except OSError as error:  # ssl.SSLError included
            logger.warning(
                "TLS handshake for %s failed (client lacks CURL_CA_BUNDLE?): %s", host, error
            )
            return
        with tls:
            try:
                _TunnelHandler(tls, self.client_address, self.server)
            except OSError as error:  # the client went away mid-request: its problem to report
                logger.debug("tunnel to %s closed: %s", host, error)


def _ssl_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def _environment(emulator_url: str, proxy_url: str, credentials: Path, ca: Path) -> dict:
    no_proxy = f"{LOOPBACK},localhost"
    return {
        # Beam and google-cloud-storage: plain HTTP straight to the emulator.
        "STORAGE_EMULATOR_HOST": emulator_url,
        # Beam and TF: a credential that works offline (without one Beam waits ~22 s).
        "GOOGLE_APPLICATION_CREDENTIALS": str(credentials),
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        # TF: *.googleapis.com through the TLS proxy, trusting only the test CA.
        "https_proxy": proxy_url,
        "HTTPS_PROXY": proxy_url,
        "CURL_CA_BUNDLE": str(ca),
        # Loopback traffic (emulator, token endpoint) must never be proxied.
        "no_proxy": no_proxy,
        "NO_PROXY": no_proxy,
        # TF: never probe the GCE metadata server for credentials (slow offline).
        "NO_GCE_CHECK": "true",
        # TF: fail within seconds rather than retry with backoff for minutes.
        "GCS_RETRY_CONFIG_MAX_RETRIES": "2",
        # TF: no stale stat results after wipe() or after another process wrote an object.
        "GCS_STAT_CACHE_MAX_AGE": "0",
    }


class GcsEmulator:
    """Context manager. Starts emulator + token endpoint + TLS proxy on free loopback ports.

    Everything starts in the constructor, so `env` is usable at once; `close()` (or leaving
    the `with` block) stops the servers and restores os.environ if `apply_env()` changed it.

    Attributes:
        bucket: the bucket name, already created.
        env: environment variables that point Beam, google-cloud-storage and TensorFlow at
            the emulator. Pass them to subprocesses, which read them at start-up:
            ``subprocess.run(cmd, env={**os.environ, **gcs.env})``.
        endpoint: the emulator's base URL (``http://127.0.0.1:PORT``).
    """

    def __init__(self, bucket: str = "test-bucket", workdir: str | None = None):
        self.bucket = bucket
        self._stack = contextlib.ExitStack()
        self._saved_environ: dict[str, str | None] | None = None
        try:
            self._start(workdir)
        except BaseException:
            self._stack.close()
            raise

    def _start(self, workdir: str | None) -> None:
        if workdir is None:
            workdir = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="gcs-"))
        path = Path(workdir)
        path.mkdir(parents=True, exist_ok=True)
        self.endpoint = f"http://{LOOPBACK}:{_start_emulator(self.bucket, self._stack)}"
        token_port = _serve(_TokenHandler, self._stack)
        credentials = path / "service-account.json"
        _write_service_account(credentials, f"http://{LOOPBACK}:{token_port}/token")
        ca, cert, key = _write_certificates(path)
        proxy_port = _serve(
            _ConnectProxyHandler,
            self._stack,
            ssl_context=_ssl_context(cert, key),
            token_port=token_port,
            emulator_port=int(self.endpoint.rpartition(":")[2]),
        )
        self.env = _environment(self.endpoint, f"http://{LOOPBACK}:{proxy_port}", credentials, ca)

    def url(self, *parts: str) -> str:
        """``gs://{bucket}/`` + the parts joined with "/"."""
        return f"gs://{self.bucket}/" + "/".join(parts)

    def _open(self, path: str, data: bytes | None = None):
        # An empty ProxyHandler: the test process may itself carry proxy variables.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        return opener.open(urllib.request.Request(f"{self.endpoint}{path}", data=data), timeout=30)

    def wipe(self) -> None:
        """Deletes all objects; keeps the buckets."""
        with self._open("/wipe?keep-buckets=true") as response:
            if response.status != 200:
                raise RuntimeError(f"emulator wipe failed: HTTP {response.status}")

    def object_names(self, prefix: str = "") -> list[str]:
        """Object names under a prefix, straight from the emulator's JSON API (no proxy)."""
        query = urllib.parse.urlencode({"prefix": prefix})
        with self._open(f"/storage/v1/b/{self.bucket}/o?{query}") as response:
            return sorted(item["name"] for item in json.load(response).get("items", []))

    def read_object(self, name: str) -> bytes:
        quoted = urllib.parse.quote(name, safe="")
        with self._open(f"/storage/v1/b/{self.bucket}/o/{quoted}?alt=media") as response:
            return response.read()

    def write_object(self, name: str, data: bytes) -> None:
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        with self._open(f"/upload/storage/v1/b/{self.bucket}/o?{query}", data) as response:
            if response.status != 200:
                raise RuntimeError(f"emulator upload failed: HTTP {response.status}")

    def apply_env(self) -> None:
        """os.environ.update(self.env) for in-process use; undone by restore_env()/close().

        Clients cache their endpoint and credentials when created (TF's GCS filesystem on
        first use, Beam's GcsIO per process), so apply this before the first gs:// access.
        """
        if self._saved_environ is None:
            self._saved_environ = {name: os.environ.get(name) for name in self.env}
        os.environ.update(self.env)

    def restore_env(self) -> None:
        """Puts back the os.environ values that apply_env() replaced."""
        saved, self._saved_environ = self._saved_environ, None
        for name, value in (saved or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def close(self) -> None:
        self.restore_env()
        self._stack.close()

    def __enter__(self) -> GcsEmulator:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# pytest fixtures (register with `pytest_plugins = ["tests.support.gcs"]`)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory) -> GcsEmulator:
    """One emulator for the whole test session (start-up costs ~0.5 s of key generation)."""
    with GcsEmulator(workdir=str(tmp_path_factory.mktemp("gcs_emulator"))) as emulator:
        yield emulator


@pytest.fixture
def gcs(gcs_emulator) -> GcsEmulator:
    """The session emulator with an empty bucket; env changes from apply_env() are undone
    after the test."""
    gcs_emulator.wipe()
    yield gcs_emulator
    gcs_emulator.restore_env()
