"""`payd serve` under systemd (deploy/payd.service, Type=notify with WatchdogSec): READY=1 once
the node can take traffic, WATCHDOG=1 every half watchdog period after, RELOADING=1 then READY=1
around a SIGHUP, STOPPING=1 on SIGTERM. The test plays the service manager: a datagram socket
named by NOTIFY_SOCKET, as systemd gives it."""
import os
import signal
import socket
import time

import pytest

from conftest import BACKEND, Payd


@pytest.fixture
def manager(tmp_path):
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(10)
    yield path, sock
    sock.close()


def messages(sock, until, timeout=10):
    """Every notification until one holds `until`, with the time each came."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            text = sock.recv(4096).decode()
        except socket.timeout:
            break
        got.append((time.monotonic(), text))
        if until in text:
            return got
    raise AssertionError(f"no {until!r} in {got}")


def test_ready_watchdog_reload_and_stop(manager, tmp_path):
    path, sock = manager
    server = Payd(str(tmp_path), env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"})
    server.start()
    try:
        first = messages(sock, "READY=1")
        assert server.request("GET", "/readyz").status == 200
        # the watchdog: every 200 ms (half of 400 ms), and only after READY
        assert not any("WATCHDOG=1" in text for _, text in first)
        pings = [t for t, text in messages(sock, "WATCHDOG=1") + messages(sock, "WATCHDOG=1")
                 + messages(sock, "WATCHDOG=1") if "WATCHDOG=1" in text]
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        assert len(pings) == 3 and all(0.1 < g < 1.0 for g in gaps), gaps

        server.proc.send_signal(signal.SIGHUP)
        reload = [text for _, text in messages(sock, "READY=1")]
        assert any("RELOADING=1" in text for text in reload), reload
        assert server.proc.poll() is None
    finally:
        server.proc.send_signal(signal.SIGTERM)
        assert any("STOPPING=1" in text for _, text in messages(sock, "STOPPING=1"))
        assert server.stop() == 0


def test_no_watchdog_pings_without_watchdog_usec(manager, tmp_path):
    path, sock = manager
    server = Payd(str(tmp_path), env={"NOTIFY_SOCKET": path})
    server.start()
    try:
        messages(sock, "READY=1")
        sock.settimeout(1.0)
        with pytest.raises(socket.timeout):
            sock.recv(4096)
    finally:
        server.stop()


def test_outside_systemd_nothing_is_sent(tmp_path):
    server = Payd(str(tmp_path), env={"NOTIFY_SOCKET": ""})
    server.start()
    assert server.request("GET", "/readyz").status == 200
    server.proc.send_signal(signal.SIGHUP)  # reloads nothing, and does not end the process
    time.sleep(0.3)
    assert server.proc.poll() is None
    assert server.stop() == 0


@pytest.mark.skipif(BACKEND != "sqlite", reason="needs no database of the suite's: run once")
def test_not_ready_while_the_database_cannot_be_reached(manager, tmp_path):
    """On PostgreSQL a node starts while its database is down (it answers 503); systemd must not
    take it for ready until the database answers."""
    from conftest import free_port
    path, sock = manager
    down = f"postgres://payd@127.0.0.1:{free_port()}/payd?connect_timeout=1"
    server = Payd(str(tmp_path), env={"NOTIFY_SOCKET": path}, db=down,
                  args=["--shutdown-timeout", "1s"])  # its stop has no database to wait for
    server.start()
    try:
        assert server.request("GET", "/readyz").status == 503
        sock.settimeout(2.0)
        with pytest.raises(socket.timeout):
            print(sock.recv(4096))
    finally:
        server.stop()
