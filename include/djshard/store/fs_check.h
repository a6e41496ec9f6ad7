#pragma once

#include <string>

#include "djshard/io/disk.h"

namespace djshard::store {

// Checks, with a few probe files in a fresh directory under `dir`, that the
// filesystem holding `dir` does what the job protocol relies on: an O_EXCL
// create that refuses an existing name, link() (first-writer-wins records),
// rename() over an existing file, flock() that excludes a second holder, and
// an mtime that moves when a file is rewritten (leases). Throws Error naming
// the missing operation and the mount (filesystem type and mount point)
// otherwise. Leaves nothing behind.
void CheckJobFilesystem(const std::string& dir, io::Disk& disk = io::RealDisk());

// "<type> on <mount point>" of the filesystem holding `path`, from
// /proc/self/mountinfo ("unknown filesystem" when it cannot be read).
std::string DescribeMount(const std::string& path);

}  // namespace djshard::store
