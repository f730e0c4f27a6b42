"""A witness stand-in on loopback that follows C2SP tlog-witness: it verifies the log's signature,
checks the old size against the last size it cosigned (409 with that size when they differ), checks
the consistency proof (422 when it fails) and returns a real cosignature/v1 line."""

import base64
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from audit import merkle
from audit.signed_note import (
    SIGNATURE_PREFIX,
    CosignatureVerifier,
    NoteError,
    Verifier,
    cosignature_message,
    open_checkpoint,
    split_note,
)


class WitnessStandIn:
    def __init__(self, name: str, log_key: Verifier):
        self.name = name
        self.log_key = log_key
        self._key = Ed25519PrivateKey.generate()
        public = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.verifier = CosignatureVerifier(name, public)
        self.size, self.root = 0, merkle.EMPTY_ROOT  # the latest checkpoint it cosigned
        self.mode = "honest"  # or "down" (500), "slow" (sleeps), "forgetful" (refuses any old size)
        self.requests: list[str] = []
        self.lock = threading.Lock()
        self._server = None

    # The protocol.

    def add_checkpoint(self, body: str) -> tuple[int, str, str]:
        head, _, note = body.partition("\n\n")
        lines = head.split("\n")
        if not lines[0].startswith("old ") or not lines[0][4:].isdigit():
            return 400, "text/plain", "bad old size line\n"
        old = int(lines[0][4:])
        try:
            proof = [base64.b64decode(line, validate=True) for line in lines[1:]]
            checkpoint = open_checkpoint(note, [self.log_key])
        except (NoteError, ValueError):
            return 403, "text/plain", "no valid signature by a key this witness trusts\n"
        if old > checkpoint.size:
            return 400, "text/plain", "old size beyond the checkpoint\n"
        new_root = bytes.fromhex(checkpoint.root_hash)
        with self.lock:  # the check and the update are one step, as the protocol requires
            if old != self.size or self.mode == "forgetful":
                return 409, "text/x.tlog.size", f"{self.size}\n"
            if old == checkpoint.size:
                if new_root != self.root:
                    return 409, "text/x.tlog.size", f"{self.size}\n"
            elif old and not merkle.verify_consistency(
                old, checkpoint.size, self.root, new_root, proof
            ):
                return 422, "text/plain", "the consistency proof does not verify\n"
            elif not old and proof:
                return 400, "text/plain", "a proof from size 0 must be empty\n"
            self.size, self.root = checkpoint.size, new_root
        text, _ = split_note(note)
        return 200, "text/plain", self.cosign(text) + "\n"

    def cosign(self, checkpoint_text: str, timestamp: int | None = None) -> str:
        timestamp = timestamp or int(time.time())
        signature = self._key.sign(cosignature_message(checkpoint_text, timestamp))
        payload = struct.pack(">I", self.verifier.key_id) + struct.pack(">Q", timestamp) + signature
        return f"{SIGNATURE_PREFIX}{self.name} {base64.b64encode(payload).decode()}"

    # Serving it.

    def __enter__(self):
        witness = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, 1 << 20)).decode("utf-8", "replace")
                witness.requests.append(body)
                if self.path != "/w/add-checkpoint" or witness.mode == "down":
                    status, kind, reply = (404 if witness.mode != "down" else 500), "text/plain", ""
                else:
                    if witness.mode == "slow":
                        time.sleep(3)
                    status, kind, reply = witness.add_checkpoint(body)
                data = reply.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/w"

    def setting(self) -> str:
        return f"{self.url} {self.verifier.text()}"
