"""Webhook targets a hostile merchant could aim payd at (docs/webhooks.md, "Which addresses a
webhook may reach" and "What an attempt records"):

- with --webhook-deny-private only global unicast addresses are accepted: every range of the
  IANA special-purpose registries and this machine's own interface addresses are refused when an
  endpoint is saved, and again on the address a delivery actually connects to;
- the deliveries list says what happened in payd's own words, never the transport's text;
- a receiver's response body and headers are read up to a cap, then the connection is cut.

Every receiver here listens on 127.0.0.1. The other addresses appear only as values that payd
must refuse at creation; nothing contacts them."""

import fcntl
import os
import socket
import struct
import threading
import time

from conftest import free_port
from lossy_proxy import read_request
from receiver import Receiver

VOCABULARY = {"timeout", "dns_failure", "connection_refused", "address_not_allowed", "tls_error",
              "connection_error", "bad_status", "body_too_large", "headers_too_large"}
BODY_CAP = 64 * 1024


def own_addresses():
    """This machine's interface addresses other than loopback, as URL hosts (standard library
    only: SIOCGIFADDR for IPv4, /proc/net/if_inet6 for IPv6)."""
    hosts = []
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                addr = socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, req)[20:24])
            except OSError:
                continue  # no IPv4 address
            if not addr.startswith("127."):
                hosts.append(addr)
    finally:
        s.close()
    try:
        with open("/proc/net/if_inet6") as f:
            for line in f:
                raw, scope = line.split()[0], int(line.split()[3], 16)
                if scope == 0:  # global scope (link-local ones need a zone in a URL)
                    text = ":".join(raw[i:i + 4] for i in range(0, 32, 4))
                    hosts.append("[" + socket.inet_ntop(
                        socket.AF_INET6, socket.inet_pton(socket.AF_INET6, text)) + "]")
    except OSError:
        pass
    return hosts


class RawReceiver:
    """A loopback TCP server that answers each connection with `behave(conn, self)` after reading
    the request. Each streamed answer is noted in `streams`: bytes sent, when the stream started
    and when payd cut it."""

    def __init__(self, behave):
        self.behave, self.lock = behave, threading.Lock()
        self.connections, self.streams = 0, []
        self.held = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hooks"
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn):
        try:
            if read_request(conn) is not None:
                self.behave(conn, self)
        except OSError:
            pass
        finally:
            if conn not in self.held:
                conn.close()

    def stream(self, conn, head, chunk):
        """Sends head, then chunk after chunk until payd cuts the connection, counting bytes."""
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)  # little kernel buffering
        conn.sendall(head)
        stream = {"sent": 0, "started": time.time(), "ended": None}
        with self.lock:
            self.streams.append(stream)
        try:
            while True:
                stream["sent"] += conn.send(chunk)
        except OSError:
            with self.lock:
                stream["ended"] = time.time()

    def first_stream(self, timeout=15):
        """The first streamed answer, once payd cut it (None if it never did)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if self.streams and self.streams[0]["ended"]:
                    return dict(self.streams[0])
            time.sleep(0.02)
        return None

    def close(self):
        self.sock.close()
        for conn in self.held:
            conn.close()


def close_at_once(conn, rx):
    pass  # handle() closes it without an answer


def never_answer(conn, rx):
    rx.held.append(conn)


def answer(status, extra=b""):
    def behave(conn, rx):
        conn.sendall(b"HTTP/1.1 %d X\r\nContent-Length: 0\r\n%s\r\n" % (status, extra))
    return behave


def endless_body(status):
    def behave(conn, rx):
        rx.stream(conn, b"HTTP/1.1 %d OK\r\nContent-Type: text/plain\r\n\r\n" % status,
                  b"x" * 16384)
    return behave


def endless_headers(conn, rx):
    rx.stream(conn, b"HTTP/1.1 200 OK\r\n", b"X-Pad: " + b"y" * 1000 + b"\r\n")


def attempts(user, endpoint_id):
    """The endpoint's attempts, oldest first."""
    r = user.get(f"/v1/webhook_endpoints/{endpoint_id}/deliveries")
    assert r.status == 200, r
    return r.json["data"][::-1]


def first_attempt(user, endpoint_id, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = attempts(user, endpoint_id)
        if got:
            return got[0]
        time.sleep(0.05)
    raise AssertionError(f"no attempt recorded for {endpoint_id}")


def endpoint(user, url):
    r = user.post("/v1/webhook_endpoints", {"url": url, "events": ["account.created"]})
    assert r.status == 201, r
    return r.json["id"]


# ---- 3: only global unicast under --webhook-deny-private ----

REFUSED_HOSTS = [
    # the addresses the issue found accepted
    "192.0.2.1", "198.18.0.1", "[fec0::1]", "[64:ff9b::127.0.0.1]", "[2002:7f00:1::]",
    "[::127.0.0.1]", "[::ffff:0:127.0.0.1]", "[100::1]",
    # the rest of the registries, one address each
    "0.0.0.0", "10.0.0.1", "100.64.0.1", "127.0.0.2", "169.254.169.254", "172.16.0.1",
    "192.0.0.9", "192.88.99.1", "192.168.1.1", "198.51.100.1", "203.0.113.1", "224.0.0.1",
    "240.0.0.1", "255.255.255.255", "[::]", "[::1]", "[::ffff:10.0.0.1]", "[64:ff9b:1::1]",
    "[2001::1]", "[2001:db8::1]", "[fc00::1]", "[fe80::1]", "[ff02::1]", "[3fff::1]",
    "localhost",
]


def test_deny_private_refuses_every_special_purpose_and_own_address(fresh_server):
    s = fresh_server(args=["--webhook-deny-private"])
    u = s.create_user()
    own = own_addresses()
    print("this machine's own addresses, refused:", own)
    for host in REFUSED_HOSTS + own:
        url = f"http://{host}:8080/hook"
        r = u.post("/v1/webhook_endpoints", {"url": url, "events": ["*"]})
        assert r.status == 400 and r.json["code"] == "invalid_parameter", (url, r)
        assert r.json["param"] == "url" and "global unicast" in r.json["detail"], (url, r)
    # an update is held to the same rule. The public address is a value, never connected to:
    # the endpoint takes only webhook_endpoint.disabled, which follows failed deliveries to it
    ok = u.post("/v1/webhook_endpoints",
                {"url": "http://93.184.216.34/hook", "events": ["webhook_endpoint.disabled"]})
    assert ok.status == 201, ok
    for host in ("198.18.0.1", "[::127.0.0.1]"):
        r = u.request("PATCH", f"/v1/webhook_endpoints/{ok.json['id']}",
                      {"url": f"https://{host}/hook"})
        assert r.status == 400 and r.json["param"] == "url", (host, r)
    assert u.get(f"/v1/webhook_endpoints/{ok.json['id']}").json["url"] == (
        "http://93.184.216.34/hook")
    assert [e["id"] for e in u.get("/v1/webhook_endpoints").json["data"]] == [ok.json["id"]]


def test_the_address_connected_to_is_checked_at_each_delivery(fresh_server):
    """An endpoint saved while the flag was off (loopback allowed) and delivered after a restart
    with the flag on: the connection is refused before it is made, in payd's words."""
    s = fresh_server(args=["--webhook-retry-scale", "0.001"])
    u = s.create_user()
    rx = Receiver()
    try:
        ep = endpoint(u, rx.url)
        s.stop()
        s.args.append("--webhook-deny-private")
        s.start()
        u.create_account()
        got = first_attempt(u, ep)
        assert got["error"] == "address_not_allowed", got
        assert got["response_status"] is None and got["outcome"] == "retrying", got
        time.sleep(0.3)  # retries fall due every few tens of ms at this scale
        assert {a["error"] for a in attempts(u, ep)} == {"address_not_allowed"}
        assert rx.requests == []
    finally:
        rx.close()


# ---- 4: the deliveries list in payd's words ----

def test_deliveries_say_what_happened_in_payds_words_only(fresh_server):
    s = fresh_server(args=["--webhook-retry-scale", "0.001"])
    u = s.create_user()
    dead_port = free_port()  # nothing listens there
    target = Receiver()
    closing, silent = RawReceiver(close_at_once), RawReceiver(never_answer)
    failing = RawReceiver(answer(503))
    redirect = RawReceiver(answer(302, b"Location: " + target.url.encode() + b"\r\n"))
    try:
        eps = {
            "closes": endpoint(u, closing.url),
            "nothing listening": endpoint(u, f"http://127.0.0.1:{dead_port}/hooks"),
            "never answers": endpoint(u, silent.url),
            "503": endpoint(u, failing.url),
            "redirect": endpoint(u, redirect.url),
        }
        u.create_account()
        got = {name: first_attempt(u, ep) for name, ep in eps.items()}
        assert got["closes"]["error"] == "connection_error", got
        assert got["nothing listening"]["error"] == "connection_refused", got
        assert got["503"]["error"] == "bad_status" and got["503"]["response_status"] == 503, got
        # a redirect is a failed attempt and is never followed
        assert got["redirect"]["error"] == "bad_status", got
        assert got["redirect"]["response_status"] == 302, got
        assert got["never answers"]["error"] == "timeout", got  # after the 10 s request timeout
        assert 9000 <= got["never answers"]["latency_ms"] < 12000, got
        assert target.requests == []
        for ep in eps.values():
            for a in attempts(u, ep):
                assert a["error"] in VOCABULARY and a["outcome"] == "retrying", a
                assert not any(word in a["error"] for word in ("ailed", "eply", " ")), a
        # the details are the operator's: in the log, not in the API
        log = s.read_log()
        assert "webhook attempt ended without a clean answer" in log
        assert "Empty reply from server" in log and f"127.0.0.1 port {dead_port}" in log
    finally:
        for rx in (target, closing, silent, failing, redirect):
            rx.close()


# ---- 5: response bodies and headers are read up to a cap ----

def test_an_endless_body_is_cut_at_the_cap(fresh_server):
    s = fresh_server(args=["--webhook-retry-scale", "0.001"])
    u = s.create_user()
    ok_body, bad_body = RawReceiver(endless_body(200)), RawReceiver(endless_body(500))
    try:
        ok_ep, bad_ep = endpoint(u, ok_body.url), endpoint(u, bad_body.url)
        u.create_account()
        ok, bad = first_attempt(u, ok_ep), first_attempt(u, bad_ep)
        # the status decides: a 2xx delivers, cut or not, and says the body was too large
        assert ok["outcome"] == "delivered" and ok["response_status"] == 200, ok
        assert ok["error"] == "body_too_large", ok
        assert bad["outcome"] == "retrying" and bad["error"] == "bad_status", bad
        for rx in (ok_body, bad_body):
            stream = rx.first_stream()
            assert stream, "payd never cut the connection"
            took = stream["ended"] - stream["started"]
            print(f"receiver sent {stream['sent']} bytes in {took:.3f} s before payd closed")
            assert took < 2.0, took
            # what payd read (at most the cap) plus what the two kernels buffered
            assert stream["sent"] < 8 * BODY_CAP, stream
        assert ok_body.connections == 1  # delivered: never tried again
    finally:
        ok_body.close()
        bad_body.close()


def test_endless_headers_are_cut_at_the_cap(fresh_server):
    s = fresh_server(args=["--webhook-retry-scale", "0.001"])
    u = s.create_user()
    rx = RawReceiver(endless_headers)
    try:
        ep = endpoint(u, rx.url)
        u.create_account()
        got = first_attempt(u, ep)
        assert got["error"] == "headers_too_large" and got["response_status"] == 200, got
        stream = rx.first_stream()
        assert stream and stream["ended"] - stream["started"] < 2.0, stream
        print(f"receiver sent {stream['sent']} bytes of headers before payd closed")
        assert stream["sent"] < 8 * BODY_CAP, stream
    finally:
        rx.close()

