#pragma once
// The models behind `tokenization: true` in Data-Juicer's text filters: a
// Hugging Face tokenizer (alphanumeric_filter) or a SentencePiece model per
// language (words_num_filter, word_repetition_filter).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/model/sentencepiece.h"
#include "djshard/model/tokenizer.h"
#include "djshard/recipe/recipe.h"

namespace djshard::ops {

// The local directory (or file) of the Hugging Face model named by argument
// `key` (default `fallback`), at `revision` in the hub cache: see
// model::FindHuggingFaceModel. Not found: an Error at the argument's line
// naming `what` ("model", "Hugging Face tokenizer"), every path searched and
// how to fill the cache; `needs` says what a local directory must hold.
std::string ResolveModelArgument(const recipe::OperatorArgs& args, const std::string& key,
                                 const std::string& fallback, const std::string& revision,
                                 const std::string& what, const std::string& needs);

// The Hugging Face tokenizer named by argument `key` (default `fallback`): a
// directory or tokenizer.json, or an id "org/name" found in
// $DJSHARD_MODEL_HOME or the Hugging Face cache. Loaded once per process.
// Not found: an Error at recipe load listing every path searched.
std::shared_ptr<const model::Tokenizer> LoadHfTokenizer(const recipe::OperatorArgs& args,
                                                        const std::string& key,
                                                        const std::string& fallback);

// The path of Data-Juicer's model file `file` ("en.sp.model", "en.arpa.bin"),
// found as model::FindDataJuicerModelFile finds it. Not found: an Error at the
// line of argument `key` naming `what`, `lang` and every path searched.
std::string FindDataJuicerModelArgument(const recipe::OperatorArgs& args, const std::string& key,
                                        const std::string& file, const std::string& what,
                                        const std::string& lang);

// Data-Juicer's SentencePiece model for a language ("<lang>.sp.model", from
// $DJSHARD_MODEL_HOME or Data-Juicer's model cache), loaded once per process.
// Not found or unreadable: an Error naming `lang` at the line of argument `key`.
std::shared_ptr<const model::SentencePiece> SentencePieceForLang(
    const recipe::OperatorArgs& args, const std::string& lang,
    const std::string& key = "tokenization");

// Python's str.isalpha() for one code point, and the count over a text.
bool IsAlpha(uint32_t cp);
size_t CountAlpha(std::string_view s);

}  // namespace djshard::ops
