// The lineage benchmark of SPEC-lineage §7, run by bench/lineage_bench.sh.
//
//   lineage_bench run RECIPE INPUT OUTPUT THREADS
//       djshard's executor on RECIPE (modes a and c, the poison runs).
//   lineage_bench flat RECIPE INPUT OUTPUT THREADS
//       mode b, flat explode + regroup: (1) every parent's paragraphs to a flat
//       child JSONL with parent row and ordinal, (2) RECIPE (the model op
//       alone) over it in cross-parent batches, (3) sort by (row, ordinal),
//       group and join each parent's bench_score list back; a barrier between
//       the steps, djshard's reader and writer for every file.
//
// Each prints one JSON line: wall seconds, parents, children, model calls and
// items, peak RSS, parent latency p50/p99 (expand to emit) and the output's
// sha256.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "djshard/common/clock.h"
#include "djshard/exec/executor.h"
#include "djshard/exec/plan.h"
#include "djshard/io/discover.h"
#include "djshard/io/input.h"
#include "djshard/io/json_text.h"
#include "djshard/io/output.h"
#include "djshard/io/record.h"
#include "djshard/io/sha256.h"
#include "djshard/ops/sample.h"
#include "djshard/ops/split.h"
#include "djshard/recipe/recipe.h"

namespace {

using djshard::MonotonicSeconds;
using nlohmann::json;
namespace exec = djshard::exec;
namespace io = djshard::io;
namespace ops = djshard::ops;

long PeakRssKb() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

json Report(const exec::ExecSummary& s, double wall, uint64_t parents, uint64_t children,
            const std::vector<double>& latency, const std::string& output) {
  json j = {{"wall_s", wall},
            {"parents", parents},
            {"children", children},
            {"parents_per_s", static_cast<double>(parents) / wall},
            {"children_per_s", static_cast<double>(children) / wall},
            {"peak_rss_mb", static_cast<double>(PeakRssKb()) / 1024.0},
            {"latency_p50_s", Percentile(latency, 0.50)},
            {"latency_p99_s", Percentile(latency, 0.99)},
            {"sha256", io::Sha256OfFile(output)}};
  json model = json::array();  // the model operators, in recipe order
  for (size_t i = 0; i < s.operators.size(); ++i) {
    const exec::OperatorCounters& c = s.operators[i];
    if (c.calls == 0) continue;
    model.push_back(
        {{"op_idx", i},
         {"name", c.name},
         {"calls", c.calls},
         {"items", c.items},
         {"mean_batch_fill", static_cast<double>(c.items) / static_cast<double>(c.calls)}});
  }
  j["model_ops"] = model;
  if (!s.regions.empty()) j["regions"] = exec::RegionCountersJson(s.regions);
  return j;
}

// Runs `plan` over `input` into `output`; per batch, the time it was read and
// the time its output was written give every parent of it its latency.
exec::ExecSummary Run(const exec::Plan& plan, const std::string& input, const std::string& output,
                      int threads, std::vector<double>* latency) {
  const std::vector<io::InputCandidate> inputs = io::DiscoverInputs(input, input);
  io::LineChunker chunker(inputs.size(), 512 << 10, plan.batch_rows,
                          [&inputs](size_t i) { return io::OpenInput(inputs[i].path); });
  std::mutex mu;
  std::vector<std::pair<double, uint64_t>> read_at;  // per batch: time read, rows
  size_t written = 0;
  io::OutputStream out(output, true);
  exec::ExecOptions options;
  options.threads = threads;
  options.source = [&](io::LineChunk* chunk) {
    const bool got = chunker.Next(chunk);
    if (got) {
      std::lock_guard<std::mutex> lock(mu);
      read_at.emplace_back(MonotonicSeconds(), chunk->lines);
    }
    return got;
  };
  options.output_tee = [&](std::string_view, uint64_t) {
    std::lock_guard<std::mutex> lock(mu);
    const double now = MonotonicSeconds();
    const auto [t, rows] = read_at[written++];
    for (uint64_t r = 0; r < rows; ++r) latency->push_back(now - t);
  };
  exec::ExecSummary s = exec::Execute(plan, inputs, out, nullptr, options);
  out.Commit(false);
  return s;
}

int RunMode(const std::string& recipe_path, const std::string& input, const std::string& output,
            int threads) {
  const djshard::recipe::Recipe recipe = djshard::recipe::LoadRecipe(recipe_path);
  const exec::Plan plan = exec::CompilePlan(recipe, ops::Registry::Global());
  std::vector<double> latency;
  const double start = MonotonicSeconds();
  const exec::ExecSummary s = Run(plan, input, output, threads, &latency);
  const double wall = MonotonicSeconds() - start;
  uint64_t children = 0;
  for (const exec::RegionCounters& r : s.regions) children += r.children_expanded;
  std::printf("%s\n", Report(s, wall, s.rows_in, children, latency, output).dump().c_str());
  return 0;
}

int FlatMode(const std::string& recipe_path, const std::string& input, const std::string& output,
             int threads) {
  const djshard::recipe::Recipe recipe = djshard::recipe::LoadRecipe(recipe_path);
  const exec::Plan plan = exec::CompilePlan(recipe, ops::Registry::Global());
  const std::string flat = output + ".flat.jsonl", scored = output + ".scored.jsonl";
  const double start = MonotonicSeconds();
  std::vector<double> expanded_at;
  // (1) Explode every parent into its paragraphs.
  uint64_t children = 0;
  {
    io::LineReader reader(io::OpenInput(input), input);
    io::OutputStream out(flat, true);
    io::Record record;
    ops::TextSplit split;
    ops::SplitBy by;
    std::string why, line;
    ops::ParseSplitBy("paragraph", &by, &why);
    std::string_view raw;
    uint64_t row = 0;
    while (reader.Next(&raw)) {
      record.AssignView(raw);
      ops::Sample sample(&record);
      const std::string& text = sample.Text(plan.text_key);
      ops::SplitText(text, by, 100000, &split);
      for (size_t k = 0; k < split.pieces.size(); ++k) {
        line = "{\"row\":" + std::to_string(row) + ",\"ord\":" + std::to_string(k) + ",\"text\":";
        io::AppendJsonString(&line, split.pieces[k].text);
        line.append("}\n");
        out.Append(line);
      }
      children += split.pieces.size();
      expanded_at.push_back(MonotonicSeconds());
      ++row;
    }
    out.Commit(false);
  }
  // (2) The model op over the flat children, batches across parents.
  std::vector<double> unused;
  const exec::ExecSummary s = Run(plan, flat, scored, threads, &unused);
  // (3) Sort by (row, ordinal), group, join back to the parents.
  struct Scored {
    uint64_t row, ord;
    std::string score;
  };
  std::vector<Scored> all;
  {
    io::LineReader reader(io::OpenInput(scored), scored);
    io::Record record;
    std::string_view raw;
    while (reader.Next(&raw)) {
      record.AssignView(raw);
      ops::Sample sample(&record);
      const std::optional<std::string_view> meta = sample.Meta("bench_score");
      all.push_back({std::stoull(std::string(*record.Find("row"))),
                     std::stoull(std::string(*record.Find("ord"))),
                     meta ? std::string(*meta) : "null"});
    }
  }
  std::sort(all.begin(), all.end(), [](const Scored& a, const Scored& b) {
    return a.row != b.row ? a.row < b.row : a.ord < b.ord;
  });
  std::vector<double> latency;
  {
    io::LineReader reader(io::OpenInput(input), input);
    io::OutputStream out(output, true);
    io::Record record;
    std::string_view raw;
    std::string line;
    size_t next = 0;
    uint64_t row = 0;
    while (reader.Next(&raw)) {
      record.Assign(raw);
      std::string list = "[";
      while (next < all.size() && all[next].row == row) {
        if (list.size() > 1) list.push_back(',');
        list.append(all[next++].score);
      }
      list.push_back(']');
      record.Set("scores", std::move(list));
      line.clear();
      record.Serialize(&line);
      line.push_back('\n');
      out.Append(line);
      latency.push_back(MonotonicSeconds() - expanded_at[row]);
      ++row;
    }
    out.Commit(false);
  }
  const double wall = MonotonicSeconds() - start;
  std::remove(flat.c_str());
  std::remove(scored.c_str());
  std::printf("%s\n",
              Report(s, wall, expanded_at.size(), children, latency, output).dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: lineage_bench run|flat RECIPE INPUT OUTPUT THREADS\n");
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "run") return RunMode(argv[2], argv[3], argv[4], std::stoi(argv[5]));
    if (mode == "flat") return FlatMode(argv[2], argv[3], argv[4], std::stoi(argv[5]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ERROR: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
