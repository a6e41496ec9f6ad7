#include "djshard/store/normalize.h"

#include <gtest/gtest.h>

#include "djshard/common/error.h"

namespace djshard::store {
namespace {

// Normalizes one line (copied into a padded buffer, as LineReader provides).
std::string Norm(RecordNormalizer& n, const std::string& line, uint64_t row = 7) {
  std::string padded = line + std::string(64, '\0');
  std::string out;
  n.Normalize(std::string_view(padded.data(), line.size()), row, "in.jsonl", 3, &out);
  return out;
}

TEST(Normalize, KeepsScalarAndStringTextAsWritten) {
  RecordNormalizer n({"images"}, "/root", {});
  EXPECT_EQ(
      Norm(n, "{ \"a\" : 1.0 , \"b\":1e5,\"c\": \"\\u00e9 x\" ,\"d\":[ 1 , -0.50 ],\"e\":{ }}"),
      "{\"a\":1.0,\"b\":1e5,\"c\":\"\\u00e9 x\",\"d\":[1,-0.50],\"e\":{}}");
}

TEST(Normalize, AppendsMissingIndexKeyWithGlobalRow) {
  RecordNormalizer n({}, "/root", {"idx", "row"});
  EXPECT_EQ(Norm(n, "{\"text\":\"t\",\"row\":\"kept\"}", 41),
            "{\"text\":\"t\",\"row\":\"kept\",\"idx\":41}");
}

TEST(Normalize, KeepsAnExistingIndexValueEvenNull) {
  RecordNormalizer n({}, "/root", {"idx"});
  EXPECT_EQ(Norm(n, "{\"idx\": null, \"text\":\"t\"}"), "{\"idx\":null,\"text\":\"t\"}");
  EXPECT_EQ(Norm(n, "{\"idx\":\"abc\"}"), "{\"idx\":\"abc\"}");
}

TEST(Normalize, RewritesRelativeMediaPathsOnly) {
  RecordNormalizer n({"images", "audios"}, "/data/set", {});
  EXPECT_EQ(Norm(n,
                 "{\"images\":[\"a.jpg\",\"./b/../c.jpg\",\"\",\"/abs/x.png\",\"http://h/p\","
                 "\"https://h/p\",\"s3://b/k\",\"gs://b/k\",\"hdfs://n/p\",\"../up.jpg\"],"
                 "\"audios\":null,\"videos\":[\"v.mp4\"]}"),
            "{\"images\":[\"/data/set/a.jpg\",\"/data/set/c.jpg\",\"\",\"/abs/x.png\","
            "\"http://h/p\",\"https://h/p\",\"s3://b/k\",\"gs://b/k\",\"hdfs://n/p\","
            "\"/data/up.jpg\"],\"audios\":null,\"videos\":[\"v.mp4\"]}");
}

TEST(Normalize, MediaItemsWithEscapesAreDecodedAndReEscaped) {
  RecordNormalizer n({"images"}, "/r", {});
  EXPECT_EQ(Norm(n, "{\"images\":[\"d\\u00e9j\\u00e0.jpg\",\"q\\\"uote.png\"]}"),
            "{\"images\":[\"/r/d\xC3\xA9j\xC3\xA0.jpg\",\"/r/q\\\"uote.png\"]}");
}

TEST(Normalize, EmptyMediaListStaysEmpty) {
  RecordNormalizer n({"images"}, "/r", {});
  EXPECT_EQ(Norm(n, "{\"images\": [ ]}"), "{\"images\":[]}");
}

TEST(Normalize, MediaMustBeAListOfStrings) {
  RecordNormalizer n({"images"}, "/r", {});
  for (const char* bad : {"{\"images\":\"a.jpg\"}", "{\"images\":[1]}", "{\"images\":{}}",
                          "{\"images\":[[\"a\"]]}", "{\"images\":true}"}) {
    try {
      Norm(n, bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.file(), "in.jsonl");
      EXPECT_EQ(e.line(), 3u);
      EXPECT_NE(e.message().find("media field 'images' must be a list of strings"),
                std::string::npos);
    }
  }
}

struct MediaCase {
  const char* item;
  bool rewritten;
  const char* normalized;
};

TEST(MediaPath, Rules) {
  const MediaCase cases[] = {
      {"", false, ""},                                // empty stays empty
      {"/x//y", false, "/x//y"},                      // absolute: as written
      {"http://h/a/../b", false, "http://h/a/../b"},  // URLs: as written
      {"https://h/p", false, "https://h/p"},
      {"s3://b/k", false, "s3://b/k"},
      {"gs://b/k", false, "gs://b/k"},
      {"hdfs://n/p", false, "hdfs://n/p"},
      {"a//b/./c", true, "/r/a/b/c"},  // relative: joined and normalized
      {"./a.jpg", true, "/r/a.jpg"},
      {"../up.jpg", true, "/up.jpg"},
      {"dir/", true, "/r/dir"},          // no trailing separator
      {"ftp://x", true, "/r/ftp:/x"},    // not a URL scheme prepare keeps
      {"HTTP://x", true, "/r/HTTP:/x"},  // schemes are case-sensitive
  };
  for (const MediaCase& c : cases) {
    std::string out = "left over from the previous item";
    EXPECT_EQ(NormalizeMediaPath("/r", c.item, &out), c.rewritten) << c.item;
    EXPECT_EQ(out, c.normalized) << c.item;
  }
}

}  // namespace
}  // namespace djshard::store
