// Operators for black-box tests of the job protocol (slow shards). They are
// registered only when DJSHARD_ENABLE_TEST_OPERATORS=1.
#include <chrono>
#include <thread>

#include "djshard/common/signals.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace {

class TestSleepMapper : public Mapper {
 public:
  TestSleepMapper(const recipe::OperatorSpec& spec, const std::string& key) : Mapper(spec, key) {
    seconds_ = args().GetDouble("seconds", 1.0);
  }
  void Map(Sample&) const override {
    // Sleeps in slices, so that SIGINT/SIGTERM stop a slow record quickly.
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds_);
    while (std::chrono::steady_clock::now() < until && !StopRequested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  double seconds_;
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
       {{"seconds", "1.0", "seconds to sleep per record"}}},
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
