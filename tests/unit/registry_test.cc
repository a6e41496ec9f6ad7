// The registry: Data-Juicer's catalogue with djshard's built-in operators
// attached by name, and no built-in that silently goes missing.
#include "djshard/ops/registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "djshard/common/error.h"
#include "djshard/ops/operator.h"
#include "src/ops/builtin.h"
#include "src/ops/catalogue.h"

namespace djshard::ops {
namespace {

const std::vector<CatalogueEntry> kSmallCatalogue = {
    {"text_length_filter", OpKind::kFilter, "cpu"},
    {"document_deduplicator", OpKind::kDeduplicator, "cpu"},
    {"clean_email_mapper", OpKind::kMapper, "cpu"},
};

BuiltinOperator Builtin(const std::string& name) {
  return {name, MakeTextLengthFilter, "summary of " + name, {{"min_len", "10", "minimum"}}};
}

// The message of the Error that building a registry throws, or "".
std::string ErrorOf(const std::vector<CatalogueEntry>& catalogue,
                    const std::vector<BuiltinOperator>& builtins) {
  try {
    Registry registry(catalogue, builtins);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Registry, ABuiltinMissingFromTheCatalogueIsAnError) {
  EXPECT_EQ(
      ErrorOf(kSmallCatalogue, {Builtin("text_length_filter"), Builtin("text_lenght_filter")}),
      "built-in operator 'text_lenght_filter' is not in Data-Juicer's operator catalogue "
      "(add it to src/ops/catalogue.cc or fix its name in src/ops/builtin.cc)");
}

TEST(Registry, ABuiltinListedTwiceIsAnError) {
  EXPECT_EQ(
      ErrorOf(kSmallCatalogue, {Builtin("clean_email_mapper"), Builtin("clean_email_mapper")}),
      "built-in operator 'clean_email_mapper' is listed twice (keep one entry in "
      "src/ops/builtin.cc)");
}

TEST(Registry, BuiltinsAreAttachedToTheirCatalogueEntriesByName) {
  const Registry registry(kSmallCatalogue,
                          std::vector<BuiltinOperator>{Builtin("text_length_filter")});
  ASSERT_EQ(registry.All().size(), 3u);
  EXPECT_EQ(registry.All()[0].name, "clean_email_mapper");  // sorted by name
  EXPECT_EQ(registry.All()[2].name, "text_length_filter");
  const OperatorInfo* filter = registry.Find("text_length_filter");
  ASSERT_NE(filter, nullptr);
  EXPECT_TRUE(filter->implemented);
  EXPECT_EQ(filter->kind, OpKind::kFilter);
  EXPECT_EQ(filter->summary, "summary of text_length_filter");
  ASSERT_EQ(filter->args.size(), 1u);
  EXPECT_EQ(filter->args[0].name, "min_len");
  const OperatorInfo* dedup = registry.Find("document_deduplicator");
  ASSERT_NE(dedup, nullptr);
  EXPECT_FALSE(dedup->implemented);
  EXPECT_EQ(dedup->factory, nullptr);
  EXPECT_EQ(registry.Find("no_such_operator"), nullptr);
}

TEST(Registry, EveryBuiltinOfThisBuildIsInTheCatalogue) {
  const Registry registry(std::span<const CatalogueEntry>(kCatalogue, kCatalogueSize),
                          BuiltinOperators());
  size_t implemented = 0;
  for (const OperatorInfo& op : registry.All()) implemented += op.implemented;
  EXPECT_EQ(implemented, BuiltinOperators().size());
  EXPECT_EQ(registry.All().size(), kCatalogueSize);
}

TEST(Registry, TestOperatorsHaveTheirOwnCatalogueEntries) {
  std::vector<CatalogueEntry> catalogue(kCatalogue, kCatalogue + kCatalogueSize);
  EXPECT_NE(ErrorOf(catalogue, TestOperators()), "");
  catalogue.insert(catalogue.end(), TestOperatorCatalogue().begin(), TestOperatorCatalogue().end());
  EXPECT_EQ(ErrorOf(catalogue, TestOperators()), "");
}

}  // namespace
}  // namespace djshard::ops
