"""What the Python tests share: the default model's path, the protocol's
module that protoc generates at build time, and a connection that speaks
its frames (a 4-byte little-endian length, then the message)."""
import importlib.util
import os
import socket
import struct
import sys
import time

# Under a sanitizer (meson's b_sanitize, tests/meson.build) every step runs
# a few times slower: wall-clock bounds stretch by this much.
SLOW = 1.0 if os.environ.get("SI_SANITIZE", "none") in ("", "none") else 4.0


def model_path():
    """SI_MODEL, else where scripts/fetch-model.sh caches the default model"""
    env = os.environ.get("SI_MODEL")
    if env:
        return env
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "selectinfer", "SmolLM2-135M-Instruct.Q4_1.gguf")


def model_or_skip():
    """model_path(), or exit 77 (skipped) where it is absent"""
    path = model_path()
    if not os.path.exists(path):
        print("default model not found: %s" % path, file=sys.stderr)
        sys.exit(77)
    return path


def load_pb2(path):
    """selectinfer_pb2.py from the build tree; exit 77 without protobuf"""
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        print("python3 protobuf is missing (Debian: python3-protobuf)", file=sys.stderr)
        sys.exit(77)
    spec = importlib.util.spec_from_file_location("selectinfer_pb2", path)
    pb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pb)
    return pb


class Conn:
    """A client connection; recv() gives the next Response, None at EOF,
    and raises TimeoutError after timeout seconds without a byte."""

    def __init__(self, path, pb, timeout=300):
        self.pb = pb
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""

    def send_bytes(self, payload):
        self.s.sendall(struct.pack("<I", len(payload)) + payload)

    def send(self, req):
        self.send_bytes(req.SerializeToString())

    def _read(self, n):
        while len(self.buf) < n:
            d = self.s.recv(65536)
            if not d:
                return None
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        hdr = self._read(4)
        if hdr is None:
            return None
        body = self._read(struct.unpack("<I", hdr)[0])
        if body is None:
            return None
        resp = self.pb.Response()
        resp.ParseFromString(body)
        return resp

    def close(self):
        self.s.close()


def wait_ready(sock, pb, seconds):
    """Polls status until the daemon says STATE_READY (True); False when a
    reply is not a status or the time runs out. Status answers while the
    model loads."""
    t0 = time.time()
    while time.time() - t0 < seconds:
        try:
            c = Conn(sock, pb)
        except OSError:
            time.sleep(0.05)
            continue
        c.send(pb.Request(id=1, status=pb.StatusRequest()))
        r = c.recv()
        c.close()
        if r is None or r.id != 1 or r.WhichOneof("body") != "status":
            return False
        if r.status.state == pb.STATE_READY:
            return True
        time.sleep(0.1)
    return False
