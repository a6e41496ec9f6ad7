// djshard probe-op: the one-shot child in which `run` probes one model
// operator before a job starts (SPEC-checkpoints §10.3). Internal: hidden
// from help, started only by preflight.
#include <memory>

#include "commands.h"
#include "djshard/preflight/preflight.h"

namespace djshard::cli {

void AddProbeCommand(CLI::App& app, int* exit_code) {
  auto req = std::make_shared<preflight::ProbeRequest>();
  CLI::App* cmd = app.add_subcommand("probe-op", "internal: probe one model operator");
  cmd->group("");  // hidden
  cmd->add_option("--config", req->config)->required();
  cmd->add_option("--op-idx", req->op_idx)->required();
  cmd->add_option("--replay", req->replay)->delimiter(',');
  cmd->add_option("--sample", req->sample)->required();
  cmd->add_option("--work", req->work)->required();
  cmd->add_option("--warmup", req->warmup);
  cmd->add_option("--steady", req->steady);
  cmd->add_option("--result", req->result)->required();
  AddDeviceOptions(cmd);
  cmd->callback([req, exit_code]() {
    preflight::ProbeOperator(*req);
    *exit_code = 0;
  });
}

}  // namespace djshard::cli
