#include "djshard/io/checksum.h"

#include <gtest/gtest.h>

#include <string>

#include "djshard/io/sha256.h"
#include "tests/unit/temp_dir.h"

namespace djshard::io {
namespace {

std::string Xxh3Of(const std::string& bytes) {
  Xxh3 h;
  h.Update(bytes);
  return h.HexDigest();
}

// Values printed by xxh128sum (xxHash 0.8.1), which writes the canonical,
// big-endian form that records hold.
TEST(Xxh3, IsTheCanonicalFormXxh128sumPrints) {
  EXPECT_EQ(Xxh3Of(""), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(Xxh3Of("abc"), "06b05ab6733a618578af5f94892f3950");
}

TEST(Xxh3, FedInPiecesEqualsFedWhole) {
  std::string big;
  for (int i = 0; big.size() < 3000000; ++i) big += "{\"row\":" + std::to_string(i) + "}\n";
  Xxh3 pieces;
  for (size_t at = 0; at < big.size(); at += 4099) pieces.Update(big.substr(at, 4099));
  EXPECT_EQ(pieces.HexDigest(), Xxh3Of(big));
  testing::TempDir tmp;
  EXPECT_EQ(ChecksumOfFile(tmp.Write("big", big)), Checksum::Xxh3(Xxh3Of(big)));
}

TEST(Checksum, RecordsWriteXxh3AndReadOldSha256Fields) {
  nlohmann::json j = nlohmann::json::object();
  Checksum::Xxh3("ab").ToJson(j);
  Checksum::Xxh3("cd").ToJson(j, "origins_");
  EXPECT_EQ(j, nlohmann::json({{"xxh3_128", "ab"}, {"origins_xxh3_128", "cd"}}));
  EXPECT_EQ(Checksum::FromJson(j), Checksum::Xxh3("ab"));
  EXPECT_EQ(Checksum::FromJson(j, "origins_"), Checksum::Xxh3("cd"));

  // A record of an older schema: sha256, checked with SHA-256.
  const nlohmann::json old = {{"sha256", "ef"}, {"errors_sha256", "01"}};
  const Checksum sum = Checksum::FromJson(old);
  EXPECT_EQ(sum.kind, ChecksumKind::kSha256);
  EXPECT_EQ(sum.hex, "ef");
  EXPECT_EQ(sum.field(), "sha256");
  EXPECT_EQ(Checksum::FromJson(old, "errors_").hex, "01");
  EXPECT_TRUE(Checksum::FromJsonOrEmpty(old, "origins_").empty());
  EXPECT_THROW(Checksum::FromJson(old, "origins_"), nlohmann::json::out_of_range);

  ChecksumHasher sha(ChecksumKind::kSha256);
  sha.Update("abc");
  EXPECT_EQ(sha.Finish().hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, ACopiedStateGoesOnAsTheOriginalWould) {
  Sha256 original;
  original.Update("ab");
  Sha256 copy;
  copy.Update("something else, replaced by the copy");
  copy.CopyFrom(original);
  copy.Update("c");
  EXPECT_EQ(copy.HexDigest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  original.Update("x");  // the original is unaffected by the copy's updates
  EXPECT_EQ(original.HexDigest(), Sha256Hex("abx"));
}

}  // namespace
}  // namespace djshard::io
