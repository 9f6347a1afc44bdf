#!/usr/bin/env python3
"""A backup service to try the backup-job example by hand (the tests use
the same protocol in test-support/src/backup_service.rs).

GET /v1/backups/NS/NAME answers {"backups": N}; DELETE answers 202 the first
time (in progress), 204 the second (done), 404 after. --mode fail answers
500 to everything, --mode hang never answers.
"""

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DELETES = {}


def handler(mode):
    class Handler(BaseHTTPRequestHandler):
        def answer(self, status, body=b""):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def route(self, method):
            print(method, self.path, "authorization:", "yes" if self.headers.get("Authorization") else "no")
            if mode == "hang":
                time.sleep(3600)
            if mode == "fail":
                return self.answer(500, b"backup store down")
            parts = self.path.strip("/").split("/")
            if len(parts) != 4 or parts[:2] != ["v1", "backups"]:
                return self.answer(404)
            key = "/".join(parts[2:])
            deletes = DELETES.get(key, 0)
            if method == "DELETE":
                DELETES[key] = deletes + 1
                return self.answer([202, 204][deletes] if deletes < 2 else 404)
            backups = 0 if deletes >= 2 else 3
            self.answer(200, json.dumps({"backups": backups}).encode())

        def do_GET(self):
            self.route("GET")

        def do_DELETE(self):
            self.route("DELETE")

    return Handler


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--mode", choices=["ok", "fail", "hang"], default="ok")
    args = parser.parse_args()
    ThreadingHTTPServer(("127.0.0.1", args.port), handler(args.mode)).serve_forever()
