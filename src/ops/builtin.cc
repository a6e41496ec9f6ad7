#include "src/ops/builtin.h"

#include <iterator>

#include "djshard/ops/text.h"
#include "src/ops/model_operator.h"

namespace djshard::ops {

std::string IntStat(int64_t v) { return std::to_string(v); }

std::string FloatStat(double v) {
  std::string out;
  text::AppendPythonFloat(&out, v);
  return out;
}

namespace {

BuiltinOperator WithModelArguments(BuiltinOperator op, const std::string& truncation_default) {
  for (ArgDoc& a : ModelArgumentDocs(truncation_default)) op.args.push_back(std::move(a));
  return op;
}

BuiltinOperator QueryDetection(const char* name, OperatorFactory factory, const char* what,
                               const char* model, const std::string& label_key) {
  return WithModelArguments(
      {name,
       factory,
       std::string("Classifies the query's ") + what +
           " with a Hugging Face sequence classifier: __dj__meta__ gets the argmax label and its "
           "probability (softmax; sigmoid for one label or multi-label models), as Data-Juicer's "
           "text-classification pipeline gives them. Records whose meta already has both keys are "
           "left as they are (djshard checks each record, Data-Juicer a batch's first). An empty "
           "query is classified; a missing or null one is a record error. Stricter than "
           "Data-Juicer: no translation model (zh_to_en_hf_model must be null), and a query over "
           "the model's positions fails with error_type too_long unless truncation: true",
       {{"hf_model", model,
         "sequence-classification snapshot: a directory, or an id found in DJSHARD_MODEL_HOME or "
         "the Hugging Face cache (RoBERTa, XLM-R, BERT, or a TorchScript package)"},
        {"model_params", "{}",
         "torch_dtype sets dtype, revision picks the cached snapshot; trust_remote_code has no "
         "effect; other keys are refused"},
        {"zh_to_en_hf_model", "Helsinki-NLP/opus-mt-zh-en",
         "must be set to null: djshard has no translation model"},
        {"zh_to_en_model_params", "{}", "accepted; unused since zh_to_en_hf_model is null"},
        {"label_key", label_key, "__dj__meta__ key of the label"},
        {"score_key", label_key + "_score", "__dj__meta__ key of the score"}}},
      "false");
}

const std::string kDedupStage =
    "djshard run runs it as a stage over every record reaching it (records that lack the text "
    "or hold a non-string one are dropped and reported as record errors); prepare/worker/dlc "
    "jobs do not run deduplicators yet";

const std::vector<ArgDoc> kMinhashArgs = {
    {"tokenization", "space", "space, punctuation, character or sentencepiece"},
    {"window_size", "5", "tokens per shingle"},
    {"lowercase", "True", "lower-case the text first"},
    {"ignore_pattern", "None", "regular expression removed from the text first"},
    {"num_permutations", "256", "minhash values per record"},
    {"jaccard_threshold", "0.7", "similarity the bands are tuned for (0 to 1)"},
    {"num_bands", "None", "bands; computed with num_rows_per_band when either is unset"},
    {"num_rows_per_band", "None", "minhash values per band"},
    {"tokenizer_model", "None", "SentencePiece model (tokenization: sentencepiece)"},
};

std::vector<ArgDoc> WithRayBtsArguments(std::vector<ArgDoc> args) {
  const std::pair<const char*, const char*> ray[] = {{"union_find_parallel_num", "auto"},
                                                     {"union_threshold", "256"},
                                                     {"max_pending_edge_buffer_task", "20"},
                                                     {"num_edge_buffer_task_returns", "10"},
                                                     {"max_pending_filter_tasks", "20"},
                                                     {"num_filter_task_returns", "10"},
                                                     {"merge_batch_size", "1000"},
                                                     {"minhash_batch_size", "auto"},
                                                     {"memory_per_sample", "0.1"}};
  for (const auto& [name, value] : ray) {
    args.push_back({name, value, "accepted; has no effect (Ray tuning)"});
  }
  return args;
}

// Mappers that clean or rewrite text with patterns and tables.
std::vector<BuiltinOperator> CleaningMappers() {
  return {
      {"whitespace_normalization_mapper",
       MakeWhitespaceNormalizationMapper,
       "Strips the text and turns the 23 odd whitespace code points into spaces",
       {}},
      {"punctuation_normalization_mapper",
       MakePunctuationNormalizationMapper,
       "Maps Unicode punctuation to ASCII",
       {}},
      {"clean_email_mapper",
       MakeCleanEmailMapper,
       "Removes e-mail addresses",
       {{"pattern", "None", "regular expression to remove instead of e-mail addresses"},
        {"repl", "''", "replacement text"}}},
      {"clean_links_mapper",
       MakeCleanLinksMapper,
       "Removes links (URLs)",
       {{"pattern", "None", "regular expression to remove instead of links"},
        {"repl", "''", "replacement text"}}},
      {"remove_specific_chars_mapper",
       MakeRemoveSpecificCharsMapper,
       "Removes the given characters",
       {{"chars_to_remove", "'◆●■►▼▲▴∆▻▷❖♡□'", "characters to remove"}}},
      {"clean_ip_mapper",
       MakeCleanIpMapper,
       "Removes IPv4 and IPv6 addresses",
       {{"pattern", "None", "regular expression to remove instead of IP addresses"},
        {"repl", "''", "replacement text"}}},
      {"replace_content_mapper",
       MakeReplaceContentMapper,
       "Replaces what regular expressions match, pattern by pattern (DOTALL)",
       {{"pattern", "None", "a regular expression or a list of them (None: no change)"},
        {"repl", "''",
         "the replacement, or a list pairing with the patterns by position (djshard refuses a "
         "shorter list at load; Data-Juicer fails on every record)"}}},
      {"remove_table_text_mapper",
       MakeRemoveTableTextMapper,
       "Removes tables: runs of two or more lines of min_col..max_col columns separated by one "
       "space, '|' or tab, after a newline",
       {{"min_col", "2", "fewest columns (2-20)"}, {"max_col", "20", "most columns (2-20)"}}},
      {"remove_non_chinese_character_mapper",
       MakeRemoveNonChineseCharacterMapper,
       "Removes characters outside CJK U+4E00-U+9FA5 and what the flags keep",
       {{"keep_alphabet", "True", "keep ASCII letters"},
        {"keep_number", "True", "keep ASCII digits"},
        {"keep_punc", "True", "keep Data-Juicer's punctuation list"}}},
      {"remove_header_mapper",
       MakeRemoveHeaderMapper,
       "LaTeX: removes the text before the first \\chapter, \\part, \\section, "
       "\\subsection or \\subsubsection (Data-Juicer's pattern runs \\paragraph and "
       "\\subparagraph together, so neither counts alone)",
       {{"drop_no_head", "True",
         "accepted; as in Data-Juicer, a text without a header stays as it is whatever it says"}}},
      {"remove_comments_mapper",
       MakeRemoveCommentsMapper,
       "LaTeX: removes comments: inline ones with the character before their '%', and lines "
       "that start with '%'",
       {{"doc_type", "'tex'", "accepted; TeX comments are removed whatever it says"},
        {"inline", "True", "remove comments inside lines"},
        {"multiline", "True", "remove lines that start with '%'"}}},
      {"remove_bibliography_mapper",
       MakeRemoveBibliographyMapper,
       "LaTeX: removes everything from the first \\appendix, \\begin{references}, "
       "\\begin{thebibliography} or \\bibliography{...} to the end",
       {}},
      {"expand_macro_mapper",
       MakeExpandMacroMapper,
       "LaTeX: expands \\newcommand and \\def macros without arguments (definitions "
       "included, as Data-Juicer does)",
       {}},
  };
}

// Mappers that convert text or its markup, and those that drop words or sentences.
std::vector<BuiltinOperator> ConversionMappers() {
  return {
      {"chinese_convert_mapper",
       MakeChineseConvertMapper,
       "Converts between Simplified and Traditional Chinese (Taiwan, Hong Kong) and Japanese "
       "kanji with OpenCC's configurations and dictionaries (Debian's libopencc), converted as "
       "libopencc converts",
       {{"mode", "'s2t'",
         "s2t, t2s, s2tw, tw2s, s2hk, hk2s, s2twp, tw2sp, t2tw, tw2t, hk2t, t2hk, t2jp or jp2t"}}},
      {"fix_unicode_mapper",
       MakeFixUnicodeMapper,
       "Fixes mojibake, HTML entities, C1 controls, ligatures, full-width forms, curly quotes, "
       "line breaks and control characters, then normalizes (ftfy 6.3.1's fix_text, ported)",
       {{"normalization", "None", "NFC (the default), NFKC, NFD or NFKD, in any case"}}},
      {"clean_html_mapper",
       MakeCleanHtmlMapper,
       "Converts HTML to plain text: '<li>' and '<ol>' become a newline and '*', '</li>' and "
       "'</ol>' are removed, then the text is parsed as an HTML5 document and replaced by the "
       "text nodes of <body> joined as they are (script and style contents included, comments "
       "and <head> left out). Data-Juicer parses with selectolax (MyHTML). djshard reads most "
       "documents with its own HTML5 tokenizer and the insertion modes that decide where text "
       "goes, without building a tree; it hands the others to Gumbo (Debian's libgumbo), a full "
       "HTML5 parser: documents with U+0000, <select>, <template>, <noscript>, SVG or MathML, "
       "framesets, <plaintext>, <colgroup>, text or stray tags that a table moves in front of "
       "itself, a script holding '<!--', or a character reference that the tokenizer repairs "
       "(no ';', a number it replaces). Both paths follow the HTML5 specification where MyHTML "
       "departs from it, but for '</>' and references in raw text: on U+0000 MyHTML repeats the "
       "last character of the text "
       "before it "
       "('a\\x00bc' gives 'abcc'), djshard drops it ('abc'); MyHTML keeps '</>' as text "
       "after <head>, HTML5 drops it (djshard's tokenizer keeps it as MyHTML does, Gumbo "
       "drops it); MyHTML decodes every character reference in the text of an <xmp>, <iframe>, "
       "<noembed>, <noframes> or body <style> that holds an end tag of letters ('<xmp>&amp;</b>' "
       "gives '&</b>'), HTML5 none (djshard does as MyHTML); MyHTML decodes some character "
       "references in an <xmp>, <iframe> or <noembed> left open to the end of the document; a "
       "document cut short in a tag ends differently; and SVG and MathML content differ. A "
       "document that goes to Gumbo and holds one of U+10FE00-10FEEF gets U+FFFD for its "
       "control characters and noncharacters, which djshard otherwise keeps",
       {}},
      {"extract_tables_from_html_mapper",
       MakeExtractTablesFromHtmlMapper,
       "Stores the text's HTML tables in __dj__meta__: with retain_html_tags, each <table> as "
       "Beautiful Soup writes it (attributes sorted, '&', '<' and '>' escaped, void elements "
       "as '<br/>'); otherwise each table as a list of rows, a row the stripped text of its "
       "direct <td> and <th> cells (script, style, template, rt and rp text and comments left "
       "out), every <tr> below the table counting, those of nested tables too; rows without "
       "cells and tables without rows are left out, and a record whose __dj__meta__ already "
       "holds the key is left as it is. The HTML is parsed as Data-Juicer does, by Beautiful "
       "Soup 4.14 over Python 3.11's html.parser (not an HTML5 parser): tags nest as written "
       "(an unclosed <td> holds the next one), an end tag closes up to the most recent open "
       "tag of its name. One difference: a numeric reference to a surrogate (&#xD800;), which "
       "Python keeps as a lone surrogate, is U+FFFD",
       {{"tables_field_name", "'html_tables'", "the __dj__meta__ key the tables go to"},
        {"retain_html_tags", "False", "store each table's HTML instead of its cells' text"},
        {"include_header", "True",
         "keep rows that have a <th> cell (when retain_html_tags is false)"}}},
      {"clean_copyright_mapper",
       MakeCleanCopyrightMapper,
       "Removes a leading copyright comment",
       {}},
      {"remove_long_words_mapper",
       MakeRemoveLongWordsMapper,
       "Removes words whose length is outside [min_len, max_len]",
       {{"min_len", "1", "shortest word kept"}, {"max_len", "sys.maxsize", "longest word kept"}}},
      {"remove_words_with_incorrect_substrings_mapper",
       MakeRemoveWordsWithIncorrectSubstringsMapper,
       "Removes words that contain one of the substrings (after stripping special characters)",
       {{"lang", "'en'", "language of the SentencePiece model"},
        {"tokenization", "False", "true: SentencePiece pieces of <lang>.sp.model instead of words"},
        {"substrings", "['http', 'www', '.com', 'href', '//']", "substrings that condemn a word"}}},
      {"remove_repeat_sentences_mapper",
       MakeRemoveRepeatSentencesMapper,
       "Removes sentences already seen in the text",
       {{"lowercase", "False", "compare sentences lower-cased"},
        {"ignore_special_character", "True", "compare sentences without special characters"},
        {"min_repeat_sentence_length", "2", "shorter sentences are always kept"}}},
  };
}

// Filters on text statistics, word lists and token counts.
std::vector<BuiltinOperator> StatFilters() {
  return {
      {"text_length_filter",
       MakeTextLengthFilter,
       "Keeps texts whose length is in range",
       {{"min_len", "10", "minimum code points"},
        {"max_len", "sys.maxsize", "maximum code points"}}},
      {"average_line_length_filter",
       MakeAverageLineLengthFilter,
       "Keeps texts whose average line length is in range",
       {{"min_len", "10", "minimum average"}, {"max_len", "sys.maxsize", "maximum average"}}},
      {"maximum_line_length_filter",
       MakeMaximumLineLengthFilter,
       "Keeps texts whose longest line is in range",
       {{"min_len", "10", "minimum"}, {"max_len", "sys.maxsize", "maximum"}}},
      {"words_num_filter",
       MakeWordsNumFilter,
       "Keeps texts whose word count is in range",
       {{"lang", "'en'", "language"},
        {"tokenization", "False", "true: count SentencePiece pieces of <lang>.sp.model"},
        {"min_num", "10", "minimum words"},
        {"max_num", "sys.maxsize", "maximum words"}}},
      {"perplexity_filter",
       MakePerplexityFilter,
       "Keeps texts whose KenLM perplexity (<lang>.arpa.bin over <lang>.sp.model pieces) is in "
       "range",
       {{"lang", "'en'", "language of the SentencePiece and KenLM models"},
        {"min_ppl", "0", "minimum perplexity"},
        {"max_ppl", "1500", "maximum perplexity"}}},
      {"word_repetition_filter",
       MakeWordRepetitionFilter,
       "Keeps texts whose repeated word n-gram ratio is in range",
       {{"lang", "'en'", "language"},
        {"tokenization", "False", "true: n-grams of SentencePiece pieces of <lang>.sp.model"},
        {"rep_len", "10", "n-gram length in words"},
        {"min_ratio", "0.0", "minimum ratio"},
        {"max_ratio", "0.5", "maximum ratio"}}},
      {"alphanumeric_filter",
       MakeAlphanumericFilter,
       "Keeps texts whose alphanumeric ratio is in range",
       {{"tokenization", "False", "true: letters per Hugging Face token (stat alpha_token_ratio)"},
        {"hf_tokenizer", "'EleutherAI/pythia-6.9b-deduped'",
         "djshard: the tokenizer for tokenization (directory, file or cached id)"},
        {"min_ratio", "0.25", "minimum ratio"},
        {"max_ratio", "sys.maxsize", "maximum ratio"}}},
      {"flagged_words_filter",
       MakeFlaggedWordsFilter,
       "Keeps texts whose share of flagged words (Data-Juicer's flagged_words.json) is in range",
       {{"lang", "'en'", "language of the list ('all': every language's words)"},
        {"tokenization", "False", "true: SentencePiece pieces of <lang>.sp.model instead of words"},
        {"min_ratio", "0.0", "minimum ratio"},
        {"max_ratio", "0.045", "maximum ratio"},
        {"flagged_words_dir", "DATA_JUICER_ASSETS_CACHE",
         "directory of *flagged_words*.json lists (default: Data-Juicer's assets cache: "
         "$DATA_JUICER_ASSETS_CACHE, else $DATA_JUICER_CACHE_HOME/assets, else "
         "~/.cache/data_juicer/assets); never downloaded"},
        {"use_words_aug", "False", "also count runs of words joined (Chinese, Vietnamese)"},
        {"words_aug_group_sizes", "[2]", "lengths of the joined runs"},
        {"words_aug_join_char", "''", "what joins a run"}}},
      {"stopwords_filter",
       MakeStopwordsFilter,
       "Keeps texts whose share of stopwords (Data-Juicer's stopwords.json) is in range",
       {{"lang", "'en'", "language of the list ('all': every language's words)"},
        {"tokenization", "False", "true: SentencePiece pieces of <lang>.sp.model instead of words"},
        {"min_ratio", "0.3", "minimum ratio"},
        {"max_ratio", "1.0", "maximum ratio"},
        {"stopwords_dir", "DATA_JUICER_ASSETS_CACHE",
         "directory of *stopwords*.json lists (default: Data-Juicer's assets cache, as for "
         "flagged_words_filter); never downloaded"},
        {"use_words_aug", "False", "also count runs of words joined (Chinese, Vietnamese)"},
        {"words_aug_group_sizes", "[2]", "lengths of the joined runs"},
        {"words_aug_join_char", "''", "what joins a run"}}},
      {"token_num_filter",
       MakeTokenNumFilter,
       "Keeps texts whose number of Hugging Face tokens (without special tokens) is in range",
       {{"hf_tokenizer", "'EleutherAI/pythia-6.9b-deduped'",
         "the tokenizer: a directory or tokenizer.json, or an id found in DJSHARD_MODEL_HOME or "
         "the Hugging Face cache; never downloaded"},
        {"min_num", "10", "fewest tokens"},
        {"max_num", "sys.maxsize", "most tokens"}}},
  };
}

// Filters on fields and languages, and the operators that run models.
std::vector<BuiltinOperator> FieldAndModelOperators() {
  return {
      {"general_field_filter",
       MakeGeneralFieldFilter,
       "Keeps records for which filter_condition holds (stat general_field_filter_condition)",
       {{"filter_condition", "''",
         "and/or, chained comparisons (<, <=, >, >=, ==, !=), field names with attribute chains "
         "(__dj__meta__.lang, __dj__stats__.x, meta.src.x) and constants, as Data-Juicer reads "
         "them; parsed by djshard (no Python eval); what Data-Juicer cannot evaluate either "
         "(not, arithmetic, in, is, calls) is refused at load. Empty: every record stays"}}},
      {"character_repetition_filter",
       MakeCharacterRepetitionFilter,
       "Keeps texts whose repeated character n-gram ratio is in range",
       {{"rep_len", "10", "n-gram length in characters"},
        {"min_ratio", "0.0", "minimum ratio"},
        {"max_ratio", "0.5", "maximum ratio"}}},
      {"special_characters_filter",
       MakeSpecialCharactersFilter,
       "Keeps texts whose special character ratio is in range",
       {{"min_ratio", "0.0", "minimum ratio"}, {"max_ratio", "0.25", "maximum ratio"}}},
      {"suffix_filter",
       MakeSuffixFilter,
       "Keeps records whose __dj__suffix__ is listed (a record without one is not)",
       {{"suffixes", "[]", "suffixes to keep (empty keeps all)"}}},
      {"specified_field_filter",
       MakeSpecifiedFieldFilter,
       "Keeps records whose field value is one of the targets",
       {{"field_key", "''", "dotted path of the field"}, {"target_value", "[]", "values to keep"}}},
      {"specified_numeric_field_filter",
       MakeSpecifiedNumericFieldFilter,
       "Keeps records whose numeric field is in range",
       {{"field_key", "''", "dotted path of the field"},
        {"min_value", "-sys.maxsize", "minimum"},
        {"max_value", "sys.maxsize", "maximum"}}},
      {"language_id_score_filter",
       MakeLanguageIdScoreFilter,
       "Keeps texts whose fastText language is one of `lang` with score >= min_score",
       {{"lang", "''", "language code or list of codes (empty: any language)"},
        {"min_score", "0.0", "minimum prediction score"},
        {"model_path", "(required)", "fastText language-id model, e.g. lid.176.bin"}}},
      QueryDetection("query_sentiment_detection_mapper", MakeQuerySentimentDetectionMapper,
                     "sentiment",
                     "mrm8488/distilroberta-finetuned-financial-news-sentiment-analysis",
                     "query_sentiment_label"),
      QueryDetection("query_topic_detection_mapper", MakeQueryTopicDetectionMapper, "topic",
                     "dstefa/roberta-base_topic_classification_nyt_news", "query_topic_label"),
      WithModelArguments(
          {"text_pair_similarity_filter",
           MakeTextPairSimilarityFilter,
           "Keeps records whose two texts' CLIP text embeddings have a cosine similarity in "
           "[min_score, max_score]; stat text_pair_similarity = [cosine] ([] when either text is "
           "empty, and the record is kept). A missing or null text is a record error. Pairs of "
           "many records share a batch. Stricter than Data-Juicer: text_key_second is required, "
           "and an input over 77 tokens fails with error_type too_long unless truncation: true",
           {{"hf_clip", "openai/clip-vit-base-patch32",
             "CLIP snapshot: a directory, or an id found in DJSHARD_MODEL_HOME or the Hugging "
             "Face cache"},
            {"trust_remote_code", "false", "accepted; has no effect (no model code runs)"},
            {"min_score", "0.1", "minimum similarity"},
            {"max_score", "1.0", "maximum similarity"},
            {"text_key_second", "(required)", "field holding the second text"},
            {"any_or_all", "any", "keep when any / all similarities are in range"}}},
          "false"),
  };
}

// The deduplicators: whole-dataset stages.
std::vector<BuiltinOperator> Deduplicators() {
  return {
      {"document_deduplicator",
       MakeDeduplicator,
       "Keeps the first record of each group of records whose texts have the same md5. " +
           kDedupStage,
       {{"lowercase", "False", "lower-case the text before hashing"},
        {"ignore_non_character", "False",
         "remove whitespace, digits and ASCII punctuation before hashing"}}},
      {"ray_document_deduplicator",
       MakeDeduplicator,
       "document_deduplicator's md5 in Data-Juicer's Ray operator: a missing or empty text is one "
       "shared value \"EMPTY\" instead of a record error; keeps the first record of each "
       "group. " +
           kDedupStage,
       {{"backend", "ray_actor", "ray_actor or redis; either gives the same rows here"},
        {"redis_address", "redis://localhost:6379", "accepted; has no effect (no Redis)"},
        {"lowercase", "False", "lower-case the text before hashing"},
        {"ignore_non_character", "False",
         "remove whitespace, digits and ASCII punctuation before hashing"}}},
      {"document_simhash_deduplicator",
       MakeDeduplicator,
       "Keeps the first record of each cluster of records whose 64-bit simhashes (of word, "
       "sentence or character shingles) differ in at most hamming_distance bits. " +
           kDedupStage,
       {{"tokenization", "space", "space, punctuation or character"},
        {"window_size", "6", "tokens per shingle"},
        {"lowercase", "True", "lower-case the text first"},
        {"ignore_pattern", "None", "regular expression removed from the text first"},
        {"num_blocks", "6", "blocks of the simhash (at most 64)"},
        {"hamming_distance", "4", "differing bits at most (less than num_blocks)"}}},
      {"document_minhash_deduplicator", MakeDeduplicator,
       "Keeps the first record of each cluster of records that share a MinHash LSH band (about "
       "jaccard_threshold Jaccard similarity of shingles). A text with fewer tokens than "
       "window_size is a record error. " +
           kDedupStage,
       kMinhashArgs},
      {"ray_bts_minhash_deduplicator", MakeDeduplicator,
       "document_minhash_deduplicator's hashes in Data-Juicer's Ray BTS operator: a text without "
       "shingles shares one band key instead of being a record error; keeps the first record of "
       "each cluster. The Ray tuning arguments are accepted and have no effect. " +
           kDedupStage,
       WithRayBtsArguments(kMinhashArgs)},
  };
}

}  // namespace

const std::vector<BuiltinOperator>& BuiltinOperators() {
  static const std::vector<BuiltinOperator> ops = [] {
    std::vector<BuiltinOperator> all;
    for (auto family :
         {CleaningMappers, ConversionMappers, StatFilters, FieldAndModelOperators, Deduplicators}) {
      std::vector<BuiltinOperator> part = family();
      all.insert(all.end(), std::make_move_iterator(part.begin()),
                 std::make_move_iterator(part.end()));
    }
    return all;
  }();
  return ops;
}

}  // namespace djshard::ops
