#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "djshard/ops/operator.h"
#include "djshard/ops/split.h"

// The `expand` and `gather` entries of a recipe (SPEC-lineage §1). They are
// not operators that run on a record: the executor splits a parent into
// children at an `expand`, runs the entries between the pair on the children,
// and rebuilds the parent at the matching `gather`. Each entry checks its own
// keys when it is built; the pairing of entries is checked by exec.
namespace djshard::ops {

inline constexpr const char* kExpandName = "expand";
inline constexpr const char* kGatherName = "gather";

struct ExpandConfig {
  std::string name;
  SplitBy by;
  std::string text_key;                  // the parent field split by text modes
  std::vector<std::string> keep_fields;  // copied into every child, raw bytes
  int64_t max_children = 100000;
  // Back-pressure: a batch's parents are expanded in groups of at most this
  // many parents, closed once they hold this many children (a group always
  // takes at least one parent); each group runs through the region before the
  // next is expanded.
  int64_t max_inflight_parents = 4096;
  int64_t max_inflight_children = 262144;
};

enum class GatherInto { kText, kField, kStats, kList };
enum class OnEmpty { kDrop, kKeep, kKeepOriginal };
enum class OnChildError { kFailParent, kDropChild };
enum class StatOp { kMean, kMin, kMax, kSum, kCount };

struct GatherStat {
  std::string from;
  StatOp op = StatOp::kMean;
  std::string to;
};

struct GatherList {
  std::string from;  // dotted path in the child
  std::string to;    // parent field
  bool keep_positions = false;
};

struct GatherConfig {
  std::string name;
  std::vector<GatherInto> into;          // empty: text or field, by the expand's mode
  std::optional<std::string> separator;  // nullopt: "original"
  std::vector<GatherStat> stats;
  std::vector<GatherList> lists;
  int64_t min_present = 1;
  double min_present_ratio = 0.0;
  OnEmpty on_empty = OnEmpty::kDrop;
  OnChildError on_child_error = OnChildError::kFailParent;
  bool suppress_siblings = true;
  // Durable lineage (SPEC-lineage §6, with checkpointing on): a journal
  // segment of gathered parents is sealed and committed once it holds this
  // many parents, or once this many seconds passed since the last seal.
  int64_t journal_flush_parents = 256;
  double journal_flush_secs = 30.0;

  bool Has(GatherInto what) const;
};

// The `expand` entry: holds its checked configuration.
class ExpandEntry : public Mapper {
 public:
  ExpandEntry(const recipe::OperatorSpec& spec, const std::string& text_key);
  void Map(Sample& sample) const override;  // never called: throws std::logic_error
  const ExpandConfig& config() const { return config_; }

 private:
  ExpandConfig config_;
};

// The `gather` entry: holds its checked configuration.
class GatherEntry : public Mapper {
 public:
  GatherEntry(const recipe::OperatorSpec& spec, const std::string& text_key);
  void Map(Sample& sample) const override;  // never called: throws std::logic_error
  const GatherConfig& config() const { return config_; }

 private:
  GatherConfig config_;
};

const char* StatOpName(StatOp op);

}  // namespace djshard::ops
