// WeightSet against files written by PyTorch (tests/data/model/weights, made
// by make_weight_fixtures.py with the values PyTorch sees in expected.json),
// and the errors of damaged, truncated and malicious files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "djshard/common/error.h"
#include "djshard/model/weights.h"
#include "src/model/weights/formats.h"
#include "src/model/weights/state_dict_pickle.h"
#include "tests/unit/temp_dir.h"

namespace djshard::model {
namespace {

using nlohmann::json;

std::string CaseDir(const std::string& name) {
  return std::string(DJSHARD_SOURCE_DIR) + "/tests/data/model/weights/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// In the file's order, which is the order PyTorch wrote the tensors in.
const nlohmann::ordered_json& Expected() {
  static const nlohmann::ordered_json expected =
      nlohmann::ordered_json::parse(ReadFile(CaseDir("expected.json")));
  return expected;
}

std::string Hex(const void* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t b = static_cast<const uint8_t*>(data)[i];
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

double HalfToDouble(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double v;
  if (exponent == 0) {
    v = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    v = mantissa == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return (h & 0x8000) ? -v : v;
}

// Element i of a tensor, widened to double.
double Element(const WeightTensor& t, size_t i) {
  const char* p = static_cast<const char*>(t.data) + i * WeightDTypeSize(t.dtype);
  const auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (t.dtype) {
    case WeightDType::kF32:
      return load(float{});
    case WeightDType::kF16:
      return HalfToDouble(load(uint16_t{}));
    case WeightDType::kBF16: {
      const uint32_t bits = uint32_t{load(uint16_t{})} << 16;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
    case WeightDType::kF64:
      return load(double{});
    case WeightDType::kI64:
      return static_cast<double>(load(int64_t{}));
    case WeightDType::kI32:
      return load(int32_t{});
    case WeightDType::kI16:
      return load(int16_t{});
    case WeightDType::kI8:
      return load(int8_t{});
    case WeightDType::kU8:
      return load(uint8_t{});
    case WeightDType::kBool:
      return load(uint8_t{});
  }
  return NAN;
}

// Every tensor of `set` is the one PyTorch wrote for `case_name`, element by
// element, in the same order.
void ExpectTensors(const WeightSet& set, const std::string& case_name) {
  const nlohmann::ordered_json& expected = Expected().at(case_name);
  ASSERT_EQ(set.tensors().size(), expected.size());
  size_t i = 0;
  for (const auto& [name, want] : expected.items()) {
    SCOPED_TRACE(case_name + ": " + name);
    const WeightTensor* t = set.Find(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(set.tensors()[i++].name, name);
    EXPECT_EQ(WeightDTypeName(t->dtype), want.at("dtype").get<std::string>());
    EXPECT_EQ(t->shape, want.at("shape").get<std::vector<int64_t>>());
    const std::vector<double> values = want.at("values").get<std::vector<double>>();
    ASSERT_EQ(t->nbytes, values.size() * WeightDTypeSize(t->dtype));
    EXPECT_EQ(Hex(t->data, t->nbytes), want.at("hex").get<std::string>());
    for (size_t e = 0; e < values.size(); ++e) EXPECT_EQ(Element(*t, e), values[e]) << e;
  }
}

// The Error that loading `dir` throws; fails the test when it loads.
Error LoadError(const std::string& dir) {
  try {
    WeightSet::Load(dir);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << dir << " loaded";
  return Error("loaded");
}

TEST(WeightSet, ReadsStateDictSavedByTorch) {
  const WeightSet set = WeightSet::Load(CaseDir("state_dict"));
  EXPECT_EQ(set.format(), "pytorch_model.bin");
  EXPECT_EQ(set.files(), std::vector<std::string>{"pytorch_model.bin"});
  ExpectTensors(set, "state_dict");
  EXPECT_EQ(set.Find("0.weight")->file, CaseDir("state_dict") + "/pytorch_model.bin");
  EXPECT_EQ(set.Find("missing"), nullptr);
}

TEST(WeightSet, ReadsTransposedOffsetAndStridedViewsOfPickledStorages) {
  ExpectTensors(WeightSet::Load(CaseDir("views")), "views");
}

TEST(WeightSet, TiedWeightsShareOneBuffer) {
  const WeightSet set = WeightSet::Load(CaseDir("views"));
  EXPECT_EQ(set.Find("embed.weight")->data, set.Find("lm_head.weight")->data);
  // An offset view that is contiguous points into the same storage's bytes.
  EXPECT_EQ(static_cast<const char*>(set.Find("row")->data),
            static_cast<const char*>(set.Find("embed.weight")->data) + 4 * sizeof(float));
}

TEST(WeightSet, ReadsZip64Archive) { ExpectTensors(WeightSet::Load(CaseDir("zip64")), "zip64"); }

TEST(WeightSet, ReadsHandWrittenSafetensors) {
  const WeightSet set = WeightSet::Load(CaseDir("safetensors"));
  EXPECT_EQ(set.format(), "safetensors");
  EXPECT_EQ(set.files(), std::vector<std::string>{"model.safetensors"});
  ExpectTensors(set, "safetensors");
}

TEST(WeightSet, ReadsEachSafetensorsShardOnce) {
  const WeightSet set = WeightSet::Load(CaseDir("sharded_safetensors"));
  EXPECT_EQ(set.format(), "safetensors");
  EXPECT_EQ(set.files(), (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                                   "model-00002-of-00002.safetensors"}));
  ExpectTensors(set, "sharded_safetensors");
  EXPECT_EQ(set.Find("c.weight")->file,
            CaseDir("sharded_safetensors") + "/model-00002-of-00002.safetensors");
}

TEST(WeightSet, ReadsEachPytorchBinShardOnce) {
  const WeightSet set = WeightSet::Load(CaseDir("sharded_bin"));
  EXPECT_EQ(set.format(), "pytorch_model.bin");
  EXPECT_EQ(set.files(), (std::vector<std::string>{"pytorch_model-00001-of-00002.bin",
                                                   "pytorch_model-00002-of-00002.bin"}));
  ExpectTensors(set, "sharded_bin");
}

TEST(WeightSet, PrefersSafetensorsOverPytorchBin) {
  testing::TempDir tmp;
  tmp.Write("pytorch_model.bin", ReadFile(CaseDir("views") + "/pytorch_model.bin"));
  tmp.Write("model.safetensors", ReadFile(CaseDir("safetensors") + "/model.safetensors"));
  const WeightSet set = WeightSet::Load(tmp.dir());
  EXPECT_EQ(set.format(), "safetensors");
  ExpectTensors(set, "safetensors");
}

TEST(WeightSet, SetStaysValidAfterMove) {
  WeightSet set = WeightSet::Load(CaseDir("views"));
  const WeightSet moved = std::move(set);
  ExpectTensors(moved, "views");
}

TEST(WeightSet, NoWeightsFileListsTheNamesLookedFor) {
  testing::TempDir tmp;
  tmp.Write("config.json", "{}");
  const Error e = LoadError(tmp.dir());
  EXPECT_EQ(e.file(), tmp.dir());
  for (const char* name : {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                           "pytorch_model.bin.index.json"}) {
    EXPECT_NE(e.message().find(name), std::string::npos) << e.what();
  }
}

TEST(WeightSet, RefusesForbiddenGlobalWithoutRunningIt) {
  const std::string witness = "/tmp/djshard-weights-fixture-was-executed";
  std::filesystem::remove(witness);
  const Error e = LoadError(CaseDir("malicious"));
  EXPECT_EQ(e.file(), CaseDir("malicious") + "/pytorch_model.bin");
  EXPECT_NE(e.message().find("posix.system"), std::string::npos) << e.what();
  EXPECT_NE(e.message().find("never runs code"), std::string::npos) << e.what();
  EXPECT_FALSE(std::filesystem::exists(witness));
}

TEST(WeightSet, RefusesCheckpointWithNestedDicts) {
  const Error e = LoadError(CaseDir("nested"));
  EXPECT_EQ(e.file(), CaseDir("nested") + "/pytorch_model.bin");
  EXPECT_NE(e.message().find("'model' is a nested dict"), std::string::npos) << e.what();
}

TEST(WeightSet, RefusesCompressedZipEntries) {
  const Error e = LoadError(CaseDir("compressed"));
  EXPECT_EQ(e.file(), CaseDir("compressed") + "/pytorch_model.bin");
  EXPECT_NE(e.message().find("is compressed"), std::string::npos) << e.what();
}

TEST(WeightSet, RefusesBigEndianArchive) {
  const Error e = LoadError(CaseDir("big_endian"));
  EXPECT_NE(e.message().find("byteorder is 'big'"), std::string::npos) << e.what();
}

TEST(WeightSet, RefusesLegacyTorchFormat) {
  const Error e = LoadError(CaseDir("legacy"));
  EXPECT_EQ(e.file(), CaseDir("legacy") + "/pytorch_model.bin");
  EXPECT_NE(e.message().find("legacy format"), std::string::npos) << e.what();
}

// A directory holding `bytes` as `name`.
class OneFile {
 public:
  OneFile(const std::string& name, const std::string& bytes) : path_(tmp_.Write(name, bytes)) {}
  const std::string& dir() const { return tmp_.dir(); }
  const std::string& path() const { return path_; }

 private:
  testing::TempDir tmp_;
  std::string path_;
};

std::string Safetensors(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

TEST(WeightSet, ChangedSafetensorsHeaderByteIsAnErrorNamingTheFile) {
  const std::string good = ReadFile(CaseDir("safetensors") + "/model.safetensors");
  std::string bad = good;
  bad[8] = 'x';  // the header's opening brace
  OneFile f("model.safetensors", bad);
  Error e = LoadError(f.dir());
  EXPECT_EQ(e.file(), f.path());
  EXPECT_NE(e.message().find("not JSON"), std::string::npos) << e.what();

  bad = good;
  bad[6] = 1;  // the header length, now past the end of the file
  OneFile g("model.safetensors", bad);
  e = LoadError(g.dir());
  EXPECT_EQ(e.file(), g.path());
  EXPECT_NE(e.message().find("header length"), std::string::npos) << e.what();
}

TEST(WeightSet, SafetensorsErrorsNameTheTensor) {
  const struct {
    std::string header;
    std::string data;
    std::string message;
  } cases[] = {
      {R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", "ab", "unknown dtype"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd", "need 8"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "ab", "outside"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "abcd", "outside"},
      {R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd", "dimension"},
      {R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", "abcd",
       "overflows"},
      {R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", "abcd", "no shape"},
      {R"({"w":[]})", "", "not an object"},
  };
  for (const auto& c : cases) {
    OneFile f("model.safetensors", Safetensors(c.header, c.data));
    const Error e = LoadError(f.dir());
    EXPECT_EQ(e.file(), f.path());
    EXPECT_NE(e.message().find("tensor 'w'"), std::string::npos) << e.what();
    EXPECT_NE(e.message().find(c.message), std::string::npos) << e.what();
  }
}

// The parser of a fixture, by its file name.
weights::ParsedWeights Parse(const std::string& bytes, const std::string& file) {
  return file.ends_with(".safetensors") ? weights::ParseSafetensors(bytes, file)
                                        : weights::ParseTorchZip(bytes, file);
}

const char* const kFixtures[] = {"safetensors/model.safetensors", "views/pytorch_model.bin",
                                 "zip64/pytorch_model.bin", "state_dict/pytorch_model.bin"};

TEST(WeightSet, TruncatedFilesAreErrorsNamingTheFile) {
  for (const std::string name : kFixtures) {
    const std::string bytes = ReadFile(CaseDir(name));
    const std::string file_name = std::filesystem::path(name).filename();
    for (const size_t n : {size_t{0}, size_t{7}, bytes.size() / 2, bytes.size() - 1}) {
      OneFile f(file_name, bytes.substr(0, n));
      const Error e = LoadError(f.dir());
      EXPECT_EQ(e.file(), f.path()) << name << " cut to " << n << " bytes: " << e.what();
    }
    // Every other length, parsed from memory.
    for (size_t n = 0; n < bytes.size(); ++n) {
      try {
        Parse(bytes.substr(0, n), file_name);
        ADD_FAILURE() << name << " cut to " << n << " bytes loaded";
      } catch (const Error& e) {
        ASSERT_EQ(e.file(), file_name) << name << " cut to " << n << " bytes: " << e.what();
      }
    }
  }
}

TEST(WeightSet, AnyChangedByteLoadsOrIsAnError) {
  for (const std::string name : kFixtures) {
    const std::string good = ReadFile(CaseDir(name));
    const std::string file_name = std::filesystem::path(name).filename();
    for (size_t i = 0; i < good.size(); ++i) {
      std::string bad = good;
      bad[i] = static_cast<char>(~bad[i]);
      try {
        const weights::ParsedWeights parsed = Parse(bad, file_name);
        for (const WeightTensor& t : parsed.tensors) {
          size_t n = WeightDTypeSize(t.dtype);
          for (const int64_t d : t.shape) n *= static_cast<size_t>(d);
          ASSERT_EQ(t.nbytes, n) << name << " byte " << i << ": " << t.name;
        }
      } catch (const Error& e) {
        ASSERT_EQ(e.file(), file_name) << name << " byte " << i << ": " << e.what();
      }
    }
  }
}

TEST(WeightSet, ShardIndexErrorsNameTheIndexOrShard) {
  testing::TempDir tmp;
  const std::string shard =
      ReadFile(CaseDir("sharded_safetensors") + "/model-00001-of-00002.safetensors");
  tmp.Write("model-00001-of-00002.safetensors", shard);
  const std::string index = tmp.Path("model.safetensors.index.json");

  tmp.Write("model.safetensors.index.json",
            R"({"weight_map": {"a.weight": "model-00001-of-00002.safetensors",
                               "z.weight": "model-00002-of-00002.safetensors"}})");
  Error e = LoadError(tmp.dir());
  EXPECT_EQ(e.file(), index);
  EXPECT_NE(e.message().find("model-00002-of-00002.safetensors"), std::string::npos) << e.what();

  tmp.Write("model.safetensors.index.json",
            R"({"weight_map": {"z.weight": "model-00001-of-00002.safetensors"}})");
  e = LoadError(tmp.dir());
  EXPECT_EQ(e.file(), tmp.Path("model-00001-of-00002.safetensors"));
  EXPECT_NE(e.message().find("tensor 'z.weight' is missing"), std::string::npos) << e.what();

  tmp.Write("model.safetensors.index.json", R"({"weight_map": {"a.weight": "../../etc/passwd"}})");
  e = LoadError(tmp.dir());
  EXPECT_EQ(e.file(), index);
  EXPECT_NE(e.message().find("not a file name"), std::string::npos) << e.what();
}

// Pickles written by hand: what torch.save never writes is refused.
std::string RefusedPickle(const std::string& pickle) {
  try {
    weights::UnpickleStateDict(pickle, "x.bin");
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "x.bin");
    return e.message();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(StateDictPickle, RefusesWhatAStateDictDoesNotHold) {
  using namespace std::string_literals;
  EXPECT_NE(RefusedPickle("\x80\x02"
                          "cbuiltins\neval\n"
                          "."s)
                .find("builtins.eval"),
            std::string::npos);
  // STACK_GLOBAL is resolved with the same allow-list.
  EXPECT_NE(RefusedPickle("\x80\x04\x8c\x02os\x8c\x06system\x93."s).find("os.system"),
            std::string::npos);
  EXPECT_NE(RefusedPickle("\x80\x02]."s).find("holds a list"), std::string::npos);
  EXPECT_NE(RefusedPickle("\x80\x02}"s).find("ends early"), std::string::npos);
  EXPECT_NE(RefusedPickle("\x80\x02h\x05."s).find("never stored"), std::string::npos);
  EXPECT_NE(RefusedPickle("\x80\x02s."s).find("underflow"), std::string::npos);
  EXPECT_NE(RefusedPickle("\x80\x02}(K\x01K\x02u\x30."s).find("underflow"), std::string::npos);
  EXPECT_NE(RefusedPickle("\x80\x02i."s).find("opcode 0x69"), std::string::npos);
  // A list that contains itself is only data.
  EXPECT_NE(RefusedPickle("\x80\x02]q\x00h\x00"
                          "a."s)
                .find("holds a list"),
            std::string::npos);
}

TEST(StateDictPickle, ReadsDictOfTensorsInOrderWithLastValueOfRepeatedName) {
  using namespace std::string_literals;
  const std::string
      tensor =  // _rebuild_tensor_v2(storage '0' of 2 floats, 1, (1,), (1,), False, {})
      "ctorch._utils\n_rebuild_tensor_v2\n"
      "((X\x07\0\0\0storage"
      "ctorch\nFloatStorage\n"
      "X\x01\0\0\0"
      "0X\x03\0\0\0cpuK\x02tQ"
      "K\x01K\x01\x85K\x01\x85\x89}tR"s;
  const weights::PickledStateDict d =
      weights::UnpickleStateDict("\x80\x02}(X\x01\0\0\0b"s + tensor + "X\x01\0\0\0a"s + tensor +
                                     "X\x01\0\0\0b"s + tensor + "u.",
                                 "x.bin");
  ASSERT_EQ(d.entries.size(), 2u);
  EXPECT_EQ(d.entries[0].first, "b");
  EXPECT_EQ(d.entries[0].second, 2u);
  EXPECT_EQ(d.entries[1].first, "a");
  ASSERT_EQ(d.storages.size(), 1u);
  EXPECT_EQ(d.storages[0].numel, 2u);
  EXPECT_EQ(d.tensors[1].offset, 1u);
}

}  // namespace
}  // namespace djshard::model
