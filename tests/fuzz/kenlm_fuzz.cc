// Fuzzes the KenLM reader on bytes in memory: ARPA text and the binary
// probing and trie formats. Any bytes are read or refused with djshard's
// Error, never a crash or another exception; a model that loads scores
// sentences of known and unknown words without reading outside the bytes.
#include <cstdint>
#include <string>
#include <string_view>

#include "djshard/common/error.h"
#include "djshard/model/kenlm.h"

volatile float sink;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using djshard::Error;
  using djshard::model::KenLanguageModel;
  // A copy, so that ASan sees a read past the end of the input.
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto model = KenLanguageModel::FromBytes(bytes, "model.bin");
    float total = 0;
    for (const char* s : {"", "a b c d", "<s> a </s> b", "zz a b c d a b c", "d d d d d d d"}) {
      total += model->ScoreSentence(s);
    }
    sink = total;
  } catch (const Error&) {
  }
  return 0;
}
