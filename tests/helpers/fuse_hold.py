#!/usr/bin/env python3
"""A read-only FUSE filesystem for perfwatch's tests: it serves the files of SOURCE at
MOUNTPOINT and answers every request, except reads made by perfwatch (a process whose main
thread is named `perfwatch`), which it holds for HOLD seconds (or until it is killed, which
aborts the connection and fails them) before answering.

Every read is logged to LOG as `held PID` or `read PID`, one line each, so that a test can
tell whether perfwatch read at all.

    fuse_hold.py SOURCE MOUNTPOINT HOLD LOG

Needs fusepy (Debian: python3-fusepy) and root (or /dev/fuse access). Runs in the
foreground; the test kills it and unmounts (umount -l) whatever happens.
"""

import errno
import os
import sys
import threading
import time

try:  # Debian's python3-fusepy names the module fusepy; pip's fusepy names it fuse.
    from fusepy import FUSE, FuseOSError, Operations, fuse_get_context
except ImportError:
    from fuse import FUSE, FuseOSError, Operations, fuse_get_context


def main_comm(tid):
    """The name of the main thread of the process `tid` belongs to ('' if gone)."""
    try:
        with open(f"/proc/{tid}/status") as f:
            tgid = next(l.split()[1] for l in f if l.startswith("Tgid:"))
        with open(f"/proc/{tgid}/comm") as f:
            return f.read().strip()
    except (OSError, StopIteration):
        return ""


class Hold(Operations):
    def __init__(self, source, hold, log):
        self.source = source
        self.hold = hold
        self.log = open(log, "a", buffering=1)
        self.mutex = threading.Lock()

    def _path(self, path):
        return os.path.join(self.source, path.lstrip("/"))

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._path(path))
        except OSError as e:
            raise FuseOSError(e.errno)
        keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime",
                "st_mtime", "st_ctime", "st_ino")
        return {k: getattr(st, k) for k in keys}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._path(path))

    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise FuseOSError(errno.EROFS)
        return os.open(self._path(path), os.O_RDONLY)

    def read(self, path, size, offset, fh):
        pid = fuse_get_context()[2]
        held = main_comm(pid).startswith("perfwatch")
        with self.mutex:
            self.log.write(f"{'held' if held else 'read'} {pid}\n")
        if held:
            time.sleep(self.hold)
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)
        return 0

    def statfs(self, path):
        st = os.statvfs(self.source)
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                "f_files", "f_flag", "f_frsize", "f_namemax")
        return {k: getattr(st, k) for k in keys}


if __name__ == "__main__":
    source, mountpoint, hold, log = sys.argv[1:5]
    # direct_io: every read reaches the server (none is answered from the page cache that
    # running the program filled).
    FUSE(Hold(source, float(hold), log), mountpoint, foreground=True, ro=True,
         direct_io=True, nothreads=False, fsname="perfwatch-test-hold")
