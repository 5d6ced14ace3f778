"""HTTPS in payd (docs/deployment.md, "TLS in payd"): --tls-cert and --tls-key, TLS 1.2 and 1.3
only, and SIGHUP reading the pair again while open connections finish on theirs."""
import http.client
import os
import signal
import socket
import ssl
import subprocess
import threading
import time

import pytest

from conftest import BACKEND, PAYD, Payd

pytestmark = [
    pytest.mark.skipif(BACKEND != "sqlite", reason="TLS is the HTTP layer's, the same on every database"),
    # the old protocol versions are named to be refused
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def make_pair(directory, name):
    cert, key = os.path.join(directory, name + ".pem"), os.path.join(directory, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
                    "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def der(cert_path):
    with open(cert_path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def client_context(cafile, version=None):
    ctx = ssl.create_default_context(cafile=cafile)
    if version:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx


def handshake(port, ctx):
    """The server's certificate (DER) and the protocol agreed, or the ssl error."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert(binary_form=True), tls.version()


def https_get(port, ctx, path, key=None):
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {key}"} if key else {})
    r = conn.getresponse()
    return r.status, r.read(), conn


class TlsPayd(Payd):
    """A payd on HTTPS: its health check goes over TLS too."""

    def __init__(self, tmpdir, cert, key, args=()):
        super().__init__(tmpdir, args=["--tls-cert", cert, "--tls-key", key, *args])
        self.cafile = cert

    def request(self, method, path, key=None, body=None, headers=None, raw_body=None, timeout=30):
        status, raw, conn = https_get(self.port, client_context(self.cafile), path, key)
        conn.close()
        return type("R", (), {"status": status, "raw": raw})()


@pytest.fixture
def tls_server(tmp_path):
    cert, key = make_pair(str(tmp_path), "first")
    s = TlsPayd(str(tmp_path), cert, key).start()
    yield s
    s.stop()


def test_https_serves_tls_1_2_and_1_3_and_nothing_in_clear(tls_server):
    ctx = client_context(tls_server.cafile)
    status, body, conn = https_get(tls_server.port, ctx, "/healthz")
    assert status == 200 and b"ok" in body
    conn.close()
    for version, name in ((ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (ssl.TLSVersion.TLSv1_3, "TLSv1.3")):
        cert, agreed = handshake(tls_server.port, client_context(tls_server.cafile, version))
        assert agreed == name and cert == der(tls_server.cafile)
    # plain HTTP on the TLS port is not answered as HTTP
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=5) as raw:
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            answer = raw.recv(100)
        except ConnectionResetError:
            answer = b""
    assert not answer.startswith(b"HTTP/1.1 200")


def old_protocol_context(version):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer what payd must refuse
    ctx.minimum_version = ctx.maximum_version = version
    return ctx


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_old_protocol_versions_are_refused(tls_server, tmp_path, version):
    # The same client completes a handshake with a server that allows the old version, so a
    # refusal below is payd's, not this client's.
    cert, key = make_pair(str(tmp_path), "control")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    server_ctx.minimum_version = ssl.TLSVersion.TLSv1
    server_ctx.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    agreed = []

    def serve_one():
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                agreed.append(tls.version())
        except ssl.SSLError as e:
            agreed.append(e)

    t = threading.Thread(target=serve_one)
    t.start()
    _, version_name = handshake(listener.getsockname()[1], old_protocol_context(version))
    t.join()
    listener.close()
    assert version_name in ("TLSv1", "TLSv1.1"), agreed

    with pytest.raises(ssl.SSLError):
        handshake(tls_server.port, old_protocol_context(version))


def test_sighup_reloads_the_pair_while_an_open_connection_finishes(tls_server, tmp_path):
    first = der(tls_server.cafile)
    ctx = client_context(tls_server.cafile)
    status, _, open_conn = https_get(tls_server.port, ctx, "/healthz")
    assert status == 200

    cert, key = make_pair(str(tmp_path), "second")
    os.replace(cert, tls_server.cafile)
    os.replace(key, tls_server.args[tls_server.args.index("--tls-key") + 1])
    tls_server.proc.send_signal(signal.SIGHUP)
    # until the reload, the server still shows the first certificate: look without verifying,
    # then verify the new one with a context that trusts it alone
    look = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    look.check_hostname, look.verify_mode = False, ssl.CERT_NONE
    deadline = time.time() + 5
    while time.time() < deadline:
        got, _ = handshake(tls_server.port, look)
        if got != first:
            break
        time.sleep(0.05)
    assert got == der(tls_server.cafile) != first
    assert handshake(tls_server.port, client_context(tls_server.cafile))[0] == got
    assert "TLS certificate reloaded" in tls_server.read_log()

    # the connection made before the reload goes on, on the first certificate
    open_conn.request("GET", "/healthz")
    r = open_conn.getresponse()
    assert r.status == 200 and r.read()
    assert open_conn.sock.getpeercert(binary_form=True) == first
    open_conn.close()
    assert tls_server.proc.poll() is None


def test_a_bad_pair_on_sighup_keeps_the_one_in_use(tls_server, tmp_path):
    served = der(tls_server.cafile)
    other_cert, other_key = make_pair(str(tmp_path), "other")
    key_path = tls_server.args[tls_server.args.index("--tls-key") + 1]
    os.replace(other_key, key_path)  # a key that belongs to another certificate
    tls_server.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 5
    while "TLS certificate not reloaded" not in tls_server.read_log() and time.time() < deadline:
        time.sleep(0.05)
    assert "does not belong to the certificate" in tls_server.read_log()
    got, _ = handshake(tls_server.port, client_context(tls_server.cafile))
    assert got == served


def test_start_refuses_a_missing_half_or_a_mismatched_pair(tmp_path):
    cert, key = make_pair(str(tmp_path), "one")
    _, other_key = make_pair(str(tmp_path), "two")
    for args, words in ((["--tls-cert", cert], "go together"),
                        (["--tls-cert", cert, "--tls-key", other_key], "does not belong"),
                        (["--tls-cert", str(tmp_path / "absent.pem"), "--tls-key", key],
                         "cannot read")):
        out = subprocess.run([PAYD, "serve", "--listen", "127.0.0.1:0", "--db",
                              str(tmp_path / "p.db"), *args], capture_output=True, text=True,
                             timeout=30)
        assert out.returncode == 2 and words in out.stderr, (args, out.stderr)
