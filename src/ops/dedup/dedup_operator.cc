#include <memory>
#include <string>

#include "djshard/ops/dedup.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace dedup {

DedupOperator::DedupOperator(const recipe::OperatorSpec& spec, const std::string& default_text_key)
    : Operator(spec, default_text_key), config_(ParseDedupConfig(spec.name, args())) {
  config_.text_key = text_key();
}

}  // namespace dedup

std::unique_ptr<Operator> MakeDeduplicator(const recipe::OperatorSpec& spec,
                                           const std::string& text_key) {
  return std::make_unique<dedup::DedupOperator>(spec, text_key);
}

}  // namespace djshard::ops
