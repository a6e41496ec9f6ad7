"""A FUSE filesystem for tests: the files of ROOT at MOUNTPOINT, without hard
links (link() fails with EPERM, as on vfat or a FUSE mount without hard-link
support). Usage: nolink_fs.py ROOT MOUNTPOINT (runs in the background)."""
import errno
import os
import sys

from fusepy import FUSE, FuseOSError, Operations


class NoLinks(Operations):
    def __init__(self, root):
        self.root = root

    def _p(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._p(path))
        except OSError as e:
            raise FuseOSError(e.errno)
        return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode",
                                            "st_mtime", "st_nlink", "st_size", "st_uid")}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._p(path))

    def mkdir(self, path, mode):
        os.mkdir(self._p(path), mode)

    def rmdir(self, path):
        os.rmdir(self._p(path))

    def unlink(self, path):
        os.unlink(self._p(path))

    def rename(self, old, new):
        os.rename(self._p(old), self._p(new))

    def link(self, target, source):
        raise FuseOSError(errno.EPERM)

    def chmod(self, path, mode):
        os.chmod(self._p(path), mode)

    def utimens(self, path, times=None):
        os.utime(self._p(path), times)

    def truncate(self, path, length, fh=None):
        os.truncate(self._p(path), length)

    def create(self, path, mode, fi=None):
        return os.open(self._p(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

    def open(self, path, flags):
        return os.open(self._p(path), flags)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def fsync(self, path, datasync, fh):
        os.fsync(fh)

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)

    def statfs(self, path):
        st = os.statvfs(self._p(path))
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize",
                                            "f_favail", "f_ffree", "f_files", "f_flag",
                                            "f_frsize", "f_namemax")}


if __name__ == "__main__":
    FUSE(NoLinks(sys.argv[1]), sys.argv[2], foreground=False, nothreads=True)
