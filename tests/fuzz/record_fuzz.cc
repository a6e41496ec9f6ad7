// Fuzzes the record model: any line the parser accepts as a JSON object is
// written back byte for byte when no operator touches it, and a changed
// field round-trips through the serializer into a line the parser accepts.
#include <cstdint>
#include <cstring>
#include <string>

#include "djshard/common/error.h"
#include "djshard/io/input.h"
#include "djshard/io/json_text.h"
#include "djshard/io/record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace djshard;
  // The parser reads up to LineReader::kPadding bytes past a line.
  std::string line(reinterpret_cast<const char*>(data), size);
  if (line.find('\n') != std::string::npos) return 0;
  line.append(io::LineReader::kPadding, '\0');
  const std::string_view view(line.data(), size);
  io::JsonLineParser parser;
  try {
    parser.ParseObject(view, "fuzz", 1);
  } catch (const Error&) {
    return 0;  // refused with an error: fine
  }
  io::Record record;
  record.Assign(view);
  std::string out;
  record.Serialize(&out);
  if (out != view) __builtin_trap();  // an untouched record must come back as read

  // Replace the first field (or add one), append stats, and re-parse.
  record.Set("text", "\"fuzzed \\u00e9\"");
  record.Set("__dj__stats__", "{\"n\":1}");
  out.clear();
  record.Serialize(&out);
  out.append(io::LineReader::kPadding, '\0');
  try {
    parser.ParseObject(std::string_view(out.data(), out.size() - io::LineReader::kPadding), "fuzz",
                       1);
  } catch (const Error&) {
    __builtin_trap();  // the serializer wrote something that is not a JSON object
  }
  // Compact form of a valid object stays valid.
  std::string compact;
  io::MinifyJson(view, &compact);
  for (const io::JsonMember& m : io::SplitObject(compact)) {
    if (m.key_literal.empty() || m.key_literal.front() != '"') __builtin_trap();
    (void)io::UnescapeJsonString(m.key_literal);
  }
  return 0;
}
