"""`python -m scout_client run SPEC ...`, the same as the `scout-bot` command."""

import sys

from .cli import main

sys.exit(main())
