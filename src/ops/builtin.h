#pragma once

#include <memory>
#include <string>
#include <vector>

#include "djshard/ops/operator.h"
#include "djshard/ops/registry.h"

namespace djshard::ops {

// The operators this build implements. Each entry's `args` is the single list
// of that operator's own arguments (see BuiltinOperator).
const std::vector<BuiltinOperator>& BuiltinOperators();
// Operators for black-box tests, registered only when
// DJSHARD_ENABLE_TEST_OPERATORS=1, with their catalogue entries.
const std::vector<BuiltinOperator>& TestOperators();
const std::vector<CatalogueEntry>& TestOperatorCatalogue();
// The `expand` and `gather` recipe entries (src/ops/lineage_entries.cc), which
// djshard adds to Data-Juicer's catalogue.
const std::vector<BuiltinOperator>& LineageEntries();
const std::vector<CatalogueEntry>& LineageCatalogue();

// Factories, one per operator, defined in the operator's file.
#define DJSHARD_DECLARE_FACTORY(fn) \
  std::unique_ptr<Operator> fn(const recipe::OperatorSpec& spec, const std::string& text_key)
DJSHARD_DECLARE_FACTORY(MakeWhitespaceNormalizationMapper);
DJSHARD_DECLARE_FACTORY(MakePunctuationNormalizationMapper);
DJSHARD_DECLARE_FACTORY(MakeCleanEmailMapper);
DJSHARD_DECLARE_FACTORY(MakeCleanLinksMapper);
DJSHARD_DECLARE_FACTORY(MakeRemoveSpecificCharsMapper);
DJSHARD_DECLARE_FACTORY(MakeCleanIpMapper);
DJSHARD_DECLARE_FACTORY(MakeReplaceContentMapper);
DJSHARD_DECLARE_FACTORY(MakeRemoveTableTextMapper);
DJSHARD_DECLARE_FACTORY(MakeRemoveNonChineseCharacterMapper);
DJSHARD_DECLARE_FACTORY(MakeRemoveHeaderMapper);
DJSHARD_DECLARE_FACTORY(MakeRemoveCommentsMapper);
DJSHARD_DECLARE_FACTORY(MakeRemoveBibliographyMapper);
DJSHARD_DECLARE_FACTORY(MakeExpandMacroMapper);
DJSHARD_DECLARE_FACTORY(MakeRemoveWordsWithIncorrectSubstringsMapper);
DJSHARD_DECLARE_FACTORY(MakeFlaggedWordsFilter);
DJSHARD_DECLARE_FACTORY(MakeTokenNumFilter);
DJSHARD_DECLARE_FACTORY(MakeChineseConvertMapper);
DJSHARD_DECLARE_FACTORY(MakeFixUnicodeMapper);
DJSHARD_DECLARE_FACTORY(MakeCleanHtmlMapper);
DJSHARD_DECLARE_FACTORY(MakeExtractTablesFromHtmlMapper);
DJSHARD_DECLARE_FACTORY(MakeGeneralFieldFilter);
DJSHARD_DECLARE_FACTORY(MakeStopwordsFilter);
DJSHARD_DECLARE_FACTORY(MakeCleanCopyrightMapper);
DJSHARD_DECLARE_FACTORY(MakeRemoveLongWordsMapper);
DJSHARD_DECLARE_FACTORY(MakeRemoveRepeatSentencesMapper);
DJSHARD_DECLARE_FACTORY(MakeTextLengthFilter);
DJSHARD_DECLARE_FACTORY(MakeAverageLineLengthFilter);
DJSHARD_DECLARE_FACTORY(MakeMaximumLineLengthFilter);
DJSHARD_DECLARE_FACTORY(MakeWordsNumFilter);
DJSHARD_DECLARE_FACTORY(MakeWordRepetitionFilter);
DJSHARD_DECLARE_FACTORY(MakeAlphanumericFilter);
DJSHARD_DECLARE_FACTORY(MakeCharacterRepetitionFilter);
DJSHARD_DECLARE_FACTORY(MakeSpecialCharactersFilter);
DJSHARD_DECLARE_FACTORY(MakeSuffixFilter);
DJSHARD_DECLARE_FACTORY(MakeSpecifiedFieldFilter);
DJSHARD_DECLARE_FACTORY(MakeSpecifiedNumericFieldFilter);
DJSHARD_DECLARE_FACTORY(MakeLanguageIdScoreFilter);
DJSHARD_DECLARE_FACTORY(MakeQuerySentimentDetectionMapper);
DJSHARD_DECLARE_FACTORY(MakeQueryTopicDetectionMapper);
DJSHARD_DECLARE_FACTORY(MakeTextPairSimilarityFilter);
// The five text deduplicators (src/ops/dedup/dedup_operator.cc).
DJSHARD_DECLARE_FACTORY(MakeDeduplicator);
DJSHARD_DECLARE_FACTORY(MakePerplexityFilter);
DJSHARD_DECLARE_FACTORY(MakeTestSleepMapper);
#undef DJSHARD_DECLARE_FACTORY

// Helpers shared by filters that write one numeric stat.
std::string IntStat(int64_t v);
std::string FloatStat(double v);

}  // namespace djshard::ops
