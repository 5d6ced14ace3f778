"""What the load scripts that start their own payd share (standard library only): a free port,
enough file descriptors for their connections, a bench user with an account, waiting for payd
to answer, and the CPU time it used."""
import http.client
import json
import os
import resource
import socket
import subprocess
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


def bench_user_and_account(payd, db, name="bench"):
    """A user with an unbounded rate limit and a USD account in the database at db (migrated
    here), as `payd user create` and `payd account create` print them."""
    user = json.loads(subprocess.check_output(
        [payd, "user", "create", name, "--rate-limit", "100000000/s", "--db", db]))
    account = json.loads(subprocess.check_output(
        [payd, "account", "create", "--user", user["user_id"], "--currency", "USD", "--db", db]))
    return user, account


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


def cpu_seconds(pid):
    """user + system CPU seconds of a process so far (/proc/PID/stat, fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
