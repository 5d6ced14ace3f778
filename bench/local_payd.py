"""What the load scripts that start their own payd share (standard library only): a free port,
enough file descriptors for their connections, and waiting for payd to answer."""
import http.client
import resource
import socket
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_fd_limit(need, who):
    """Raises this process's descriptor limit (payd, started after, inherits it) or exits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, need))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < need:
        sys.exit(f"{who}: need {need} file descriptors, the hard limit is {hard}")


def wait_ready(port, who, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{who}: payd did not start")
