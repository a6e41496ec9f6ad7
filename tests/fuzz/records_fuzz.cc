// Fuzzes the readers of the job directory's records: any bytes are read or
// refused with djshard's Error, never a crash or another exception.
#include <cstdint>
#include <string>

#include "djshard/common/error.h"
#include "djshard/store/manifest.h"
#include "djshard/store/records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace djshard;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto refused_or_read = [](auto&& read) {
    try {
      read();
    } catch (const Error&) {
    }
  };
  refused_or_read([&] { store::Manifest::FromJson(text, "manifest.json"); });
  refused_or_read([&] { store::DoneRecord::FromJson(text, "done.json"); });
  refused_or_read([&] { store::FailedRecord::FromJson(text, "failed.json"); });
  refused_or_read([&] { store::LockRecord::FromJson(text, "x.lock"); });
  refused_or_read([&] { store::AttemptRecord::FromJson(text, "attempt.json"); });
  return 0;
}
