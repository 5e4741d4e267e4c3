#!/usr/bin/env python3
"""One HTTP download inside a host's namespace (standard library only):

    fetch.py URL GO_FILE      wait until GO_FILE exists (so all clients start together),
                              download URL, print "<bytes> <sha256> <seconds>"
"""
import hashlib
import os
import sys
import time
import urllib.request

url, go = sys.argv[1], sys.argv[2]
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.002)
t0 = time.monotonic()
h, n = hashlib.sha256(), 0
with urllib.request.urlopen(url, timeout=120) as r:
    while chunk := r.read(1 << 16):
        h.update(chunk)
        n += len(chunk)
print(n, h.hexdigest(), f"{time.monotonic() - t0:.6f}", flush=True)
