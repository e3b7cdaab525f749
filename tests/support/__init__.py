"""Helpers shared by the tests: an independent statement of the rules (`oracle`), engine-state
snapshots (`states`), a raw bot and its messages (`rawbot`), raw HTTP/2 (`http2`)."""
