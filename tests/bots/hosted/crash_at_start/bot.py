"""A hosted bot that crashes before it connects."""
import sys

print("crashing at start: ZeroDivisionError on purpose", file=sys.stderr, flush=True)
sys.exit(1 // 0)
