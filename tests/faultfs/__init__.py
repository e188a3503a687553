"""faultfs: crash-simulating FUSE file system for tests (see faultfs.py and README.md)."""

from .faultfs import FaultFSControl, FaultFSError, FaultFSMount, mount_faultfs

__all__ = ["FaultFSControl", "FaultFSError", "FaultFSMount", "mount_faultfs"]
