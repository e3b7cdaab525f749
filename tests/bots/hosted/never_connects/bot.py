"""A hosted bot that never connects: it sleeps for ever."""
import sys
import time

print("sleeping instead of connecting", file=sys.stderr, flush=True)
while True:
    time.sleep(60)
