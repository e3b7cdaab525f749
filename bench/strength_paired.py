"""Paired difference of two strength runs over the deals they share.

``.venv/bin/python bench/strength_paired.py A.json B.json``: B's win share minus A's, deal by
deal, with its 95 % interval (mean +- 1.96 sd / sqrt(deals)). Duplicate deals make the paired
interval much tighter than the difference of the two rows' own intervals. ``A1.json+A2.json``
pools runs of one bot over different deals (``--first-deal``). Only the player count given
(default 2) is read.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from strength import interval


def win_shares(spec: str, players: int) -> dict[int, float]:
    """Deal number -> the candidate's mean win share on it, over the '+'-joined files."""
    out: dict[int, float] = {}
    for name in spec.split("+"):
        for row in json.loads(Path(name).read_text())["rows"]:
            if row["players"] == players:
                for i, share in enumerate(row["win_share_per_deal"]):
                    out[row["first_deal"] + i] = float(share)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="the reference run(s): A.json or A1.json+A2.json")
    parser.add_argument("b", help="the candidate run(s)")
    parser.add_argument("--players", type=int, default=2)
    args = parser.parse_args()
    try:
        a, b = win_shares(args.a, args.players), win_shares(args.b, args.players)
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"strength_paired: error: not a strength run: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        print(f"strength_paired: {len(common)} deals in common; need 2 or more", file=sys.stderr)
        raise SystemExit(2)
    diff, half = interval([b[d] - a[d] for d in common])
    print(f"{len(common)} deals: A {100 * statistics.fmean(a[d] for d in common):.1f} %, "
          f"B {100 * statistics.fmean(b[d] for d in common):.1f} %, "
          f"B - A {100 * diff:+.1f} ± {100 * half:.1f} points")


if __name__ == "__main__":
    main()
