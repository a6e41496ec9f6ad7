#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "djshard/common/error.h"
#include "djshard/ops/lineage.h"
#include "djshard/ops/registry.h"

namespace djshard::cli {

namespace {

// Data-Juicer's arguments of every operator, by what djshard does with them;
// ignored ones that share a reason are listed together.
void PrintCommonArguments() {
  const struct {
    ops::CommonArgUse use;
    const char* title;
  } groups[] = {
      {ops::CommonArgUse::kHonoured, "common arguments djshard honours"},
      {ops::CommonArgUse::kRefused, "common arguments djshard refuses"},
      {ops::CommonArgUse::kIgnored, "common arguments accepted and ignored"},
  };
  for (const auto& group : groups) {
    std::printf("  %s:\n", group.title);
    std::vector<std::pair<std::string, std::string>> lines;  // meaning -> names
    for (const ops::CommonArg& a : ops::CommonArguments()) {
      if (a.use != group.use) continue;
      auto it = std::find_if(lines.begin(), lines.end(),
                             [&](const auto& l) { return l.first == a.meaning; });
      if (it == lines.end()) {
        lines.emplace_back(a.meaning, a.name);
      } else {
        it->second += std::string(", ") + a.name;
      }
    }
    for (const auto& [meaning, names] : lines) {
      if (names.size() <= 20) {
        std::printf("    %-20s %s\n", names.c_str(), meaning.c_str());
      } else {
        std::printf("    %s:\n      %s\n", names.c_str(), meaning.c_str());
      }
    }
  }
}

}  // namespace

void AddOpsCommand(CLI::App& app, int* exit_code) {
  auto name = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "ops", "List Data-Juicer's operators: kind, whether djshard runs them, their arguments");
  cmd->add_option("name", *name, "Show one operator in full");
  cmd->callback([name, exit_code]() {
    const ops::Registry& reg = ops::Registry::Global();
    if (name->empty()) {
      size_t implemented = 0, listed = 0;
      std::printf("%-44s %-13s %-5s %s\n", "operator", "kind", "accel", "djshard");
      for (const ops::OperatorInfo& op : reg.All()) {
        if (op.name == ops::kExpandName || op.name == ops::kGatherName) continue;
        ++listed;
        implemented += op.implemented;
        std::printf("%-44s %-13s %-5s %s\n", op.name.c_str(), ops::OpKindName(op.kind),
                    op.accelerator.c_str(), op.implemented ? "yes" : "-");
      }
      std::printf("%zu operators, %zu implemented by djshard\n", listed, implemented);
      std::printf("recipe entries: expand, gather (lineage regions; 'djshard ops expand')\n");
      *exit_code = 0;
      return;
    }
    const ops::OperatorInfo* op = reg.Find(*name);
    if (op == nullptr) {
      throw Error("unknown operator '" + *name + "'", "'djshard ops' lists every operator");
    }
    // expand and gather are recipe structure, listed among the mappers.
    const bool lineage = op->name == ops::kExpandName || op->name == ops::kGatherName;
    std::printf(
        "%s\n  kind: %s\n  accelerator: %s\n  implemented by djshard: %s\n", op->name.c_str(),
        lineage ? "lineage entry (an expand/gather pair, SPEC-lineage)" : ops::OpKindName(op->kind),
        op->accelerator.c_str(),
        op->implemented             ? "yes"
        : op->absent_reason.empty() ? "no (not built yet)"
                                    : ("no: it " + op->absent_reason).c_str());
    if (op->implemented) {
      std::printf("  %s\n  arguments (besides the common ones below):\n", op->summary.c_str());
      if (op->args.empty()) std::printf("    (none)\n");
      for (const ops::ArgDoc& a : op->args) {
        std::printf("    %-28s default %-14s %s\n", a.name.c_str(), a.default_value.c_str(),
                    a.doc.c_str());
      }
      PrintCommonArguments();
    }
    *exit_code = 0;
  });
}

}  // namespace djshard::cli
