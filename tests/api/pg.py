"""A throwaway PostgreSQL cluster for the API tests: initdb into a temporary directory, start it
on a free port (as the postgres user when running as root), one database per payd server."""

import atexit
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time

_cluster = None


def _bindir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")
    return os.path.dirname(found[-1])


def _as_postgres(cmd):
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--"] + cmd
    return cmd


class Cluster:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="payd-pg-")
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        bindir = _bindir()
        data = os.path.join(self.dir, "data")
        subprocess.run(_as_postgres([f"{bindir}/initdb", "-D", data, "-U", "postgres",
                                     "--auth=trust", "-E", "UTF8", "--no-sync"]),
                       check=True, capture_output=True)
        subprocess.run(_as_postgres([
            f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(self.dir, "log"), "-w", "start",
            "-o", f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                  "-c max_connections=400 -c fsync=off -c shared_buffers=64MB"]),
            check=True, capture_output=True)
        self.bindir, self.data, self.count = bindir, data, 0
        atexit.register(self.stop)

    def url(self, db="postgres"):
        return f"postgres://postgres@127.0.0.1:{self.port}/{db}"

    def psql(self, sql, db="postgres"):
        out = subprocess.run([f"{self.bindir}/psql", "-At", "-X", "-v", "ON_ERROR_STOP=1", "-c",
                              sql, self.url(db)], capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def new_database(self):
        self.count += 1
        name = f"payd_{os.getpid()}_{self.count}"
        self.psql(f"CREATE DATABASE {name}")
        return name

    def stop(self):
        subprocess.run(_as_postgres([f"{self.bindir}/pg_ctl", "-D", self.data, "-m", "immediate",
                                     "stop"]), capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def cluster():
    global _cluster
    if _cluster is None:
        _cluster = Cluster()
    return _cluster
