// Operators for black-box tests of the job protocol (slow shards). They are
// registered only when DJSHARD_ENABLE_TEST_OPERATORS=1.
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "djshard/common/signals.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace {

class TestSleepMapper : public Mapper {
 public:
  TestSleepMapper(const recipe::OperatorSpec& spec, const std::string& key) : Mapper(spec, key) {
    seconds_ = args().GetDouble("seconds", 1.0);
    fail_while_exists_ = args().GetString("fail_while_exists", "");
  }
  void Map(Sample&) const override {
    // A failure that goes away when a test removes the file: a shard that
    // fails deterministically until its cause is fixed.
    if (!fail_while_exists_.empty() && ::access(fail_while_exists_.c_str(), F_OK) == 0) {
      throw std::runtime_error("failing while " + fail_while_exists_ + " exists");
    }
    // Sleeps in slices, so that SIGINT/SIGTERM stop a slow record quickly.
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds_);
    while (std::chrono::steady_clock::now() < until && !StopRequested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  double seconds_;
  std::string fail_while_exists_;
};

}  // namespace

std::unique_ptr<Operator> MakeTestSleepMapper(const recipe::OperatorSpec& spec,
                                              const std::string& text_key) {
  return std::make_unique<TestSleepMapper>(spec, text_key);
}

const std::vector<BuiltinOperator>& TestOperators() {
  static const std::vector<BuiltinOperator> ops = {
      {"djshard_test_sleep_mapper",
       MakeTestSleepMapper,
       "Test only: sleeps `seconds` per record",
       {{"seconds", "1.0", "seconds to sleep per record"},
        {"fail_while_exists", "''", "fails every record while this file exists"}}},
  };
  return ops;
}

const std::vector<CatalogueEntry>& TestOperatorCatalogue() {
  static const std::vector<CatalogueEntry> entries = {
      {"djshard_test_sleep_mapper", OpKind::kMapper, "cpu"},
  };
  return entries;
}

}  // namespace djshard::ops
