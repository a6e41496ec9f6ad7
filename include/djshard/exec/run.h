#pragma once

#include <functional>
#include <optional>
#include <string>

#include "djshard/exec/executor.h"
#include "djshard/io/disk.h"

namespace djshard::exec {

struct RunRequest {
  std::string config_path;
  std::optional<std::string> dataset_path;  // overrides the recipe's dataset_path
  std::optional<std::string> export_path;   // overrides the recipe's export_path
  std::optional<int> threads;               // overrides the recipe's np
  std::function<void(const ExecSummary&)> progress;
};

struct RunOutcome {
  std::string export_path;
  std::string stats_path;   // <export>.stats.json
  std::string errors_path;  // <export>.errors.jsonl
  int threads = 1;
  ExecSummary summary;
};

// `djshard run`: one machine, one recipe over a file or directory. Writes the
// export (compressed for .gz/.zst), the errors file and the stats file, each
// through temp + rename (through `disk`): on any error no new output appears
// and an older one stays as it was.
RunOutcome RunRecipe(const RunRequest& request, io::Disk& disk = io::RealDisk());

}  // namespace djshard::exec
