"""A webhook receiver for the tests of internal/notify/webhook.

It verifies each request's signature with the Standard Webhooks library (PyPI
`standardwebhooks`, installed in .cache/compat-venv from compat/requirements.txt), not with
the sender's code, so a signing bug cannot hide behind a verifier that shares it.

Usage: python receiver.py SECRET STATUSES
  SECRET    the endpoint's secret, "whsec_<base64>"
  STATUSES  comma-separated answers to give to correctly signed requests, in order; the
            last repeats (e.g. "500,200"). An answer may ask for a wait with Retry-After:
            "429:120" (seconds), "503:date+600" (an HTTP date 600 s from now). A request
            whose signature does not verify is answered 401 and counts as no attempt.
It listens on 127.0.0.1 on a free port and prints "listening http://127.0.0.1:PORT" first.
GET /received answers the JSON list of what came: {id, verified, error, body, status}.
"""

import email.utils
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook


def parse(answer):
    """An answer of STATUSES: (status, the Retry-After wait or "")."""
    status, _, wait = answer.partition(":")
    return int(status), wait


def main():
    secret, statuses = sys.argv[1], [parse(s) for s in sys.argv[2].split(",")]
    hook = Webhook(secret)
    received = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            record = {"id": self.headers.get("webhook-id"), "body": body.decode("utf-8", "replace")}
            try:
                hook.verify(body, dict(self.headers.items()))
                record.update(verified=True, error="")
            except Exception as e:  # any failure to verify is the test's finding
                record.update(verified=False, error=f"{type(e).__name__}: {e}")
            with lock:
                if record["verified"]:
                    answered = sum(1 for r in received if r["verified"])
                    status, wait = statuses[min(answered, len(statuses) - 1)]
                else:
                    status, wait = 401, ""
                record["status"] = status
                received.append(record)
            self.send_response(status)
            if wait.startswith("date+"):
                self.send_header("Retry-After", email.utils.formatdate(time.time() + int(wait[5:]), usegmt=True))
            elif wait:
                self.send_header("Retry-After", wait)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            with lock:
                out = json.dumps(received).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
