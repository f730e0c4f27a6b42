"""Client ID Metadata Documents: the client_id is an https URL whose document hyperbook fetches
(through core.outbound: no redirects, a time cap, a size cap) from a public address, or from a
host listed in OAUTH_CIMD_ALLOWED_HOSTS. A real HTTPS server on loopback serves the documents,
hostile ones included."""

import datetime
import json
import ssl
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.core.cache import cache
from oauth2_provider.cimd import CIMDError

from registry.models import TokenDelegation
from signin.cimd import OutboundMetadataFetcher, _public
from tests.signin.conftest import REDIRECT, authorize_params, consent_form, new_pkce, redirect_query

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    """A self-signed certificate for localhost, and the bundle that trusts it."""
    folder = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@contextmanager
def document_server(tls_files, behaviour):
    """An HTTPS server on loopback; `behaviour(handler, url)` answers each GET."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            behaviour(self, f"https://localhost:{server.server_port}{self.path}")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*map(str, tls_files))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"https://localhost:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def send_json(handler, document, status=200, content_type="application/json"):
    body = json.dumps(document).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def good_document(handler, url):
    send_json(
        handler,
        {
            "client_id": url,
            "client_name": "Loopback agent",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        },
    )


@pytest.fixture
def cimd(settings, tls_files):
    cache.clear()  # the toolkit backs off a failed client_id for a minute
    settings.OAUTH_CIMD_CA_BUNDLE = str(tls_files[0])
    settings.OAUTH_CIMD_ALLOWED_HOSTS = ["localhost"]
    settings.OAUTH_CIMD_TIMEOUT_SECONDS = 2
    yield
    cache.clear()


class Client:
    def __init__(self, client_id):
        self.client_id = client_id


def test_a_listed_loopback_client_signs_in_marked_unverified(client, planner, cimd, tls_files):
    with document_server(tls_files, good_document) as base:
        client.force_login(planner)
        page = client.get(
            "/oauth/authorize/", authorize_params(Client(f"{base}/client.json"), new_pkce())
        )
        assert page.status_code == 200, page.content[:500]
        assert b"Loopback agent" in page.content
        assert b'id="client-unverified"' in page.content
        answer = redirect_query(
            client.post("/oauth/authorize/", consent_form(page) | {"allow": "1"})
        )
        assert "code" in answer
    delegation = TokenDelegation.objects.get(source=TokenDelegation.Source.SIGNED_IN)
    assert delegation.oauth_client_id == f"{base}/client.json"


def test_a_redirect_uri_the_document_does_not_list_is_refused(client, planner, cimd, tls_files):
    with document_server(tls_files, good_document) as base:
        client.force_login(planner)
        response = client.get(
            "/oauth/authorize/",
            authorize_params(
                Client(f"{base}/client.json"), new_pkce(), redirect_uri="https://evil.example/cb"
            ),
        )
    assert response.status_code == 400
    assert "Location" not in response


def test_a_loopback_document_is_refused_unless_its_host_is_listed(settings, cimd, tls_files):
    settings.OAUTH_CIMD_ALLOWED_HOSTS = []
    with document_server(tls_files, good_document) as base:
        with pytest.raises(CIMDError, match="not a public address"):
            OutboundMetadataFetcher().fetch(f"{base}/client.json")


def huge(handler, url):
    send_json(handler, {"client_id": url, "redirect_uris": [REDIRECT], "pad": "x" * 100_000})


def redirecting(handler, url):
    handler.send_response(302)
    handler.send_header("Location", "https://localhost:1/elsewhere.json")
    handler.end_headers()


def dripping(handler, url):
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    for _ in range(50):
        handler.wfile.write(b" ")
        handler.wfile.flush()
        time.sleep(0.2)


def not_json(handler, url):
    send_json(handler, {"client_id": url}, content_type="text/html")


def with_a_secret(handler, url):
    send_json(
        handler,
        {
            "client_id": url,
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "client_secret_basic",
        },
    )


def plain_http_redirect(handler, url):
    send_json(handler, {"client_id": url, "redirect_uris": ["http://evil.example/cb"]})


@pytest.mark.parametrize(
    ("behaviour", "problem"),
    [
        (huge, "too_large"),
        (redirecting, "redirect"),
        (dripping, "timeout"),
        (not_json, "not JSON"),
        (plain_http_redirect, "redirect URI"),
    ],
)
def test_hostile_documents_are_refused(cimd, tls_files, behaviour, problem):
    with document_server(tls_files, behaviour) as base:
        started = time.monotonic()
        with pytest.raises(CIMDError, match=problem):
            OutboundMetadataFetcher().fetch(f"{base}/client.json")
        assert time.monotonic() - started < 5


@pytest.mark.parametrize("behaviour", [huge, redirecting, with_a_secret, not_json])
def test_a_client_whose_document_is_refused_gets_no_consent_page(
    client, planner, cimd, tls_files, behaviour
):
    with document_server(tls_files, behaviour) as base:
        client.force_login(planner)
        response = client.get(
            "/oauth/authorize/", authorize_params(Client(f"{base}/client.json"), new_pkce())
        )
    assert response.status_code == 400
    assert not TokenDelegation.objects.filter(source=TokenDelegation.Source.SIGNED_IN).exists()


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("192.168.0.10", False),
        ("169.254.169.254", False),
        ("::1", False),
        ("fe80::1", False),
        ("::ffff:10.0.0.1", False),
        ("64:ff9b::a00:1", False),
        ("8.8.8.8", True),
        ("2001:4860:4860::8888", True),
    ],
)
def test_only_public_addresses_count_as_public(address, public):
    assert _public(address) is public


@pytest.mark.parametrize(
    "client_id",
    [
        "http://localhost/client.json",
        "https://user@localhost/client.json",
        "https://localhost/client.json#x",
        "https://localhost",
        "https://localhost/a/../client.json",
    ],
)
def test_a_client_id_url_outside_the_draft_is_refused_before_any_fetch(cimd, client_id):
    with pytest.raises(CIMDError):
        OutboundMetadataFetcher().fetch(client_id)
