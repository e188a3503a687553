"""``python -m faultfs BACKING MOUNTPOINT --control SOCKET`` (from tests/): same as faultfs.py."""

import sys

from .faultfs import main

sys.exit(main())
