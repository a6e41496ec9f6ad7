#pragma once

#include <functional>
#include <string>

#include "djshard/io/disk.h"
#include "djshard/store/prepare.h"
#include "src/coord/task_pool.h"

namespace djshard::coord {

// The tasks of a distributed prepare that any instance claims (a dlc
// instance, a `djshard prepare-worker`): scan tasks, which validate and
// normalize a byte range of the input on `threads` threads (0: every core),
// and a copy job's shard write tasks.
TaskPool::Kind ScanKind(int threads);
TaskPool::Kind WriteKind();

// Points `req`'s distributed scan at the pools: the coordinator publishes
// the scan plan (and a copy job's write plan) through `fenced`, its claim's
// disk, works on tasks too and waits for every result. `say(event, line)`
// tells the log what happens.
void DistributeScan(store::PrepareRequest& req, uint64_t task_bytes, TaskPool& scan,
                    TaskPool& write, io::Disk& fenced,
                    std::function<void(const std::string&, const std::string&)> say);

}  // namespace djshard::coord
