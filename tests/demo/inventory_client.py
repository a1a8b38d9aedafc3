"""A legacy client, as found in the field: urllib with no timeout anywhere.

Usage: inventory_client.py URL. Prints one logfmt line: ms=... result=ok|error detail=..."""

import sys
import time
import urllib.request

start = time.monotonic()
try:
    body = urllib.request.urlopen(sys.argv[1]).read()  # no timeout: waits forever
    result, detail = "ok", body.decode(errors="replace").strip()
except Exception as exc:  # the demo reports whatever the program would have seen
    result, detail = "error", "%s: %s" % (type(exc).__name__, exc)
ms = (time.monotonic() - start) * 1000
print('ms=%.1f result=%s detail="%s"' % (ms, result, detail.replace('"', "'")), flush=True)
sys.exit(0 if result == "ok" else 1)
