#include <malloc.h>

#include <cstdio>
#include <iostream>

#include "commands.h"
#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "logging.h"

int main(int argc, char** argv) {
  // Batches are megabytes each and come and go all the time (per batch, per
  // shard attempt). Keep freed memory in the process instead of handing it
  // back and faulting it in again; peak memory stays what the batches need.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  // Threads' heaps grow by mprotect() of their reserved range; growing in
  // steps of 16 MB instead of 128 KB saves most of those calls (untouched
  // pages cost no memory).
  mallopt(M_TOP_PAD, 16 << 20);
  CLI::App app{"djshard: curate JSONL corpora across machines that share a directory"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  int exit_code = djshard::kExitOk;
  djshard::cli::AddPrepareCommand(app, &exit_code);
  djshard::cli::AddPrepareWorkerCommand(app, &exit_code);
  djshard::cli::AddWorkerCommand(app, &exit_code);
  djshard::cli::AddStatusCommand(app, &exit_code);
  djshard::cli::AddRetryCommand(app, &exit_code);
  djshard::cli::AddMergeCommand(app, &exit_code);
  djshard::cli::AddVerifyCommand(app, &exit_code);
  djshard::cli::AddDlcCommand(app, &exit_code);
  djshard::cli::AddRunCommand(app, &exit_code);
  djshard::cli::AddJobsCommand(app, &exit_code);
  djshard::cli::AddMonitorCommand(app, &exit_code);
  djshard::cli::AddGcCommand(app, &exit_code);
  djshard::cli::AddStopCommand(app, &exit_code);
  djshard::cli::AddOpsCommand(app, &exit_code);
  djshard::cli::AddTokenizeCommand(app, &exit_code);
  djshard::cli::AddModelCommand(app, &exit_code);
  djshard::cli::AddVersionCommand(app, &exit_code);
  djshard::cli::AddProbeCommand(app, &exit_code);
  djshard::cli::AddLogOptions(app);

  djshard::InstallStopHandlers();
  try {
    djshard::cli::StartLogging(argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    djshard::cli::LogError(std::string(e.what()) + " (see 'djshard --help')");
    return djshard::kExitFailure;
  } catch (const djshard::Error& e) {
    djshard::cli::LogError(e.what());
    return e.code();
  } catch (const std::exception& e) {
    djshard::cli::LogError(std::string("internal error: ") + e.what() + " (please report it)");
    return djshard::kExitFailure;
  }
  std::cout.flush();
  return exit_code;
}
