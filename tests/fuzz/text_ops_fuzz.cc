// Fuzzes the text operators: every implemented CPU text operator runs on a
// record whose text is the input (when it is valid UTF-8); an operator may
// refuse a record with an error, but never crash, hang or corrupt it.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "djshard/common/error.h"
#include "djshard/exec/plan.h"
#include "djshard/io/input.h"
#include "djshard/io/json_text.h"
#include "djshard/io/record.h"
#include "djshard/ops/operator.h"
#include "djshard/ops/sample.h"
#include "djshard/recipe/recipe.h"

namespace {

const djshard::exec::Plan& Plans() {
  using namespace djshard;
  static const exec::Plan plan = [] {
    const std::string path = "/tmp/djshard-ops-fuzz-" + std::to_string(::getpid()) + ".yaml";
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fputs(
        "process:\n"
        "  - whitespace_normalization_mapper:\n"
        "  - punctuation_normalization_mapper:\n"
        "  - clean_email_mapper:\n"
        "  - clean_links_mapper:\n"
        "  - clean_copyright_mapper:\n"
        "  - remove_long_words_mapper:\n      max_len: 20\n"
        "  - remove_repeat_sentences_mapper:\n"
        "  - remove_specific_chars_mapper:\n"
        "  - text_length_filter:\n      min_len: 0\n"
        "  - words_num_filter:\n      min_num: 0\n"
        "  - alphanumeric_filter:\n      min_ratio: 0\n"
        "  - character_repetition_filter:\n      max_ratio: 1\n"
        "  - word_repetition_filter:\n      max_ratio: 1\n"
        "  - special_characters_filter:\n      max_ratio: 1\n"
        "  - average_line_length_filter:\n      min_len: 0\n"
        "  - maximum_line_length_filter:\n      min_len: 0\n",
        f);
    std::fclose(f);
    exec::Plan p = exec::CompilePlan(recipe::LoadRecipe(path), ops::Registry::Global());
    std::remove(path.c_str());
    return p;
  }();
  return plan;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace djshard;
  const exec::Plan& plan = Plans();
  std::string line = "{\"text\":";
  io::AppendJsonString(&line, std::string(reinterpret_cast<const char*>(data), size));
  line.push_back('}');
  const size_t length = line.size();
  line.append(io::LineReader::kPadding, '\0');
  io::JsonLineParser parser;
  try {
    parser.ParseObject(std::string_view(line.data(), length), "fuzz", 1);
  } catch (const Error&) {
    return 0;  // not valid UTF-8: the parser refuses such a line before any operator
  }
  io::Record record;
  record.Assign(std::string_view(line.data(), length));
  ops::Sample sample(&record);
  for (const exec::PlannedOperator& planned : plan.operators) {
    try {
      if (planned.op->kind() == ops::OpKind::kFilter) {
        static_cast<const ops::Filter&>(*planned.op).Process(sample);
      } else {
        static_cast<const ops::Mapper&>(*planned.op).Map(sample);
      }
    } catch (const std::exception&) {
      // An operator error drops the record; the run goes on.
    }
  }
  sample.Commit(true);
  std::string out;
  record.Serialize(&out);
  const size_t out_length = out.size();
  out.append(io::LineReader::kPadding, '\0');
  try {
    parser.ParseObject(std::string_view(out.data(), out_length), "fuzz", 1);
  } catch (const Error&) {
    __builtin_trap();  // the operators left a record that is not a JSON object
  }
  return 0;
}
