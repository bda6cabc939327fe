"""``python -m tupletree.drpc [--host H] [--port P] [--timeout SECS]``: a DRPC server."""

import sys

from tupletree.drpc.server import serve_main

sys.exit(serve_main())
