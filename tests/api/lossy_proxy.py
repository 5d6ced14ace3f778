"""A TCP proxy in front of payd that loses answers, for the clients' end-to-end tests (the C
client's in tests/api/test_c_client_e2e.py, the Python client's in clients/python/tests): the
request reaches payd and is served, and its answer never reaches the client."""
import socket
import threading


def read_request(conn):
    """One whole HTTP request from a socket: its head, then Content-Length bytes of body; None
    when the peer closes before the request is whole."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head + b"\r\n\r\n" + body


class AnswerDroppingProxy:
    """Forwards each TCP connection to payd; for the first `drop` connections it reads payd's
    whole answer and closes the client's side without passing a byte on: the request was served,
    its answer lost."""

    def __init__(self, upstream_port, drop=1):
        self.upstream_port, self.drop, self.dropped = upstream_port, drop, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.relay, args=(conn,), daemon=True).start()

    def relay(self, conn):
        drop = self.dropped < self.drop
        self.dropped += drop
        request = read_request(conn)
        if request is None:  # the client left before its request was whole
            conn.close()
            return
        with conn, socket.create_connection(("127.0.0.1", self.upstream_port)) as up:
            up.sendall(request)
            up.shutdown(socket.SHUT_WR)  # the client's one request, then payd answers and closes
            answer = b""
            while chunk := up.recv(65536):
                answer += chunk
            if not drop:
                conn.sendall(answer)

    def close(self):
        self.listener.close()
