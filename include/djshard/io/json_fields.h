#pragma once

// Integer fields of djshard's JSON files (manifest, records), read without
// undefined behaviour: nlohmann's get<uint64_t>() on 1e108 or -1 converts out
// of range. A value that is not an integer within T's range throws
// nlohmann::json::type_error, as any other type mismatch does, so callers
// report it with the file's name.
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "djshard/common/error.h"

namespace djshard::io {

template <typename T>
T IntegerValue(const nlohmann::json& v, const char* key) {
  bool ok = false;
  if (v.is_number_unsigned()) {
    ok = v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    ok = x >= 0 || std::numeric_limits<T>::is_signed;
    if (ok && x >= 0)
      ok = static_cast<uint64_t>(x) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    if (ok && x < 0) ok = x >= static_cast<int64_t>(std::numeric_limits<T>::min());
  }
  if (!ok) {
    throw nlohmann::json::type_error::create(
        302, std::string("'") + key + "' must be an integer in range, got " + v.dump(), &v);
  }
  return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>())
                                : static_cast<T>(v.get<int64_t>());
}

// j[key], which must exist.
template <typename T>
T IntegerField(const nlohmann::json& j, const char* key) {
  return IntegerValue<T>(j.at(key), key);
}

// j[key], or `fallback` when j has no such key.
template <typename T>
T IntegerField(const nlohmann::json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  return it == j.end() ? fallback : IntegerValue<T>(*it, key);
}

// An Error as a task's result carries it to the process that reports it:
// {file, line, message, hint, code}; and back.
inline nlohmann::json ErrorToJson(const Error& e) {
  return {{"file", e.file()},
          {"line", e.line()},
          {"message", e.message()},
          {"hint", e.hint()},
          {"code", e.code()}};
}
inline Error ErrorFromJson(const nlohmann::json& j) {
  return Error(j.at("file").get<std::string>(), IntegerField<uint64_t>(j, "line"),
               j.at("message").get<std::string>(), j.at("hint").get<std::string>(),
               IntegerField<int>(j, "code"));
}

}  // namespace djshard::io
