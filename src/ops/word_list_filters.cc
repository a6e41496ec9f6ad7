// flagged_words_filter and stopwords_filter: the share of a text's words
// found in one of Data-Juicer's word lists.
#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "djshard/common/error.h"
#include "djshard/io/disk.h"
#include "djshard/model/model_path.h"
#include "djshard/ops/text.h"
#include "src/ops/builtin.h"
#include "src/ops/stat_filter.h"
#include "src/ops/tokenization.h"

namespace djshard::ops {

namespace {

namespace fs = std::filesystem;

// One kind of word list ("flagged_words", "stopwords") by language, as
// Data-Juicer's load_words_asset reads it: every *.json file of a directory
// whose name holds the kind, each a {language: [words]} object, lists of one
// language concatenated; "all" is every language's words unless a file has it.
// Looked up by string_view: a word is counted without a copy of it.
struct WordHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using WordSet = std::unordered_set<std::string, WordHash, std::equal_to<>>;

struct WordLists {
  std::vector<std::string> files;
  std::map<std::string, WordSet> by_lang;
};

std::string Expand(const std::string& path) {
  if (path.rfind("~/", 0) != 0 && path != "~") return path;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + path.substr(1);
}

// The files of kind `kind` in `dir`, sorted; none when `dir` holds none.
std::vector<std::string> ListFiles(const std::string& dir, const std::string& kind) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".json") && name.find(kind) != std::string::npos) {
      files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::shared_ptr<const WordLists> ReadLists(const std::vector<std::string>& files) {
  auto lists = std::make_shared<WordLists>();
  lists->files = files;
  bool has_all = false;
  for (const std::string& file : files) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(io::ReadFile(file));
    } catch (const nlohmann::json::exception& e) {
      throw Error(file, 0, std::string("not valid JSON: ") + e.what(),
                  "a word list is a JSON object {\"<language>\": [\"word\", ...]}");
    }
    if (!j.is_object()) {
      throw Error(file, 0, "a word list must be a JSON object of language -> list of words", "");
    }
    for (const auto& [lang, words] : j.items()) {
      if (!words.is_array()) throw Error(file, 0, "language '" + lang + "' is not a list", "");
      has_all = has_all || lang == "all";
      auto& set = lists->by_lang[lang];
      for (const auto& w : words) {
        if (!w.is_string()) throw Error(file, 0, "language '" + lang + "' holds a non-string", "");
        set.insert(w.get<std::string>());
      }
    }
  }
  if (!has_all) {
    auto& all = lists->by_lang["all"];
    for (const auto& [lang, words] : lists->by_lang) {
      if (lang != "all") all.insert(words.begin(), words.end());
    }
  }
  return lists;
}

// The lists of `kind`: from the directory argument `dir_key` when given, else
// Data-Juicer's assets cache. Read once per process. None found: an error at
// the argument's line naming every directory searched.
std::shared_ptr<const WordLists> LoadLists(const recipe::OperatorArgs& args,
                                           const std::string& dir_key, const std::string& kind) {
  std::vector<std::string> dirs;
  if (args.Has(dir_key) && !args.Raw(dir_key).IsNull()) {
    dirs.push_back(Expand(args.GetString(dir_key, "")));
  }
  dirs.push_back(Expand(model::DataJuicerCacheDir("DATA_JUICER_ASSETS_CACHE", "assets")));
  std::vector<std::string> files;
  for (const std::string& dir : dirs) {
    files = ListFiles(dir, kind);
    if (!files.empty()) break;
  }
  if (files.empty()) {
    std::string searched;
    for (const std::string& d : dirs) searched += "\n  " + d + "/*" + kind + "*.json";
    args.Fail(dir_key,
              "names no directory with a " + kind + " word list (*" + kind +
                  "*.json); searched:" + searched,
              "copy Data-Juicer's " + kind + ".json (a machine where Data-Juicer ran has it in " +
                  "~/.cache/data_juicer/assets) into one of them, or set " + dir_key);
  }
  static std::mutex mu;
  static std::map<std::vector<std::string>, std::shared_ptr<const WordLists>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = loaded[files];
  if (!slot) slot = ReadLists(files);
  return slot;
}

class WordListFilter : public StatFilter {
 public:
  WordListFilter(const recipe::OperatorSpec& spec, const std::string& key, const char* stat_key,
                 const char* kind, Range range)
      : StatFilter(spec, key, stat_key, range) {
    const std::string dir_key = std::string(kind) + "_dir";
    lists_ = LoadLists(args(), dir_key, kind);
    const std::string lang = args().GetString("lang", "en");
    const auto it = lists_->by_lang.find(lang);
    if (it == lists_->by_lang.end()) {
      std::string langs;
      for (const auto& [l, words] : lists_->by_lang) langs += (langs.empty() ? "" : ", ") + l;
      args().Fail("lang", "'" + lang + "' has no " + kind + " list in " + lists_->files.front(),
                  "languages there: " + langs);
    }
    words_ = &it->second;
    if (args().GetBool("tokenization", false)) pieces_ = SentencePieceForLang(args(), lang);
    augment_ = args().GetBool("use_words_aug", false);
    join_ = args().GetString("words_aug_join_char", "");
    const YAML::Node sizes = args().Raw("words_aug_group_sizes");
    if (sizes && sizes.IsSequence()) {
      group_sizes_.clear();
      for (const auto& s : sizes) {
        const int64_t n = s.as<int64_t>(0);
        if (n < 1) args().Fail("words_aug_group_sizes", "must be a list of positive integers", "");
        group_sizes_.push_back(static_cast<size_t>(n));
      }
    } else if (sizes && !sizes.IsNull()) {
      args().Fail("words_aug_group_sizes", "must be a list of positive integers", "e.g. [2]");
    }
  }

  std::string Compute(const std::string& text) const override {
    size_t total = 0;
    size_t listed = 0;
    if (augment_) {
      std::vector<std::string> words;
      ForEachRefinedWord(text, [&](std::string_view w) { words.emplace_back(w); });
      Augment(&words);
      for (const std::string& w : words) listed += words_->count(w);
      total = words.size();
    } else {
      ForEachRefinedWord(text, [&](std::string_view w) {
        ++total;
        listed += words_->count(w);
      });
    }
    if (total == 0) return FloatStat(0.0);
    return FloatStat(std::min(1.0, static_cast<double>(listed) / static_cast<double>(total)));
  }

 private:
  // Calls f on each word (or SentencePiece piece) lower-cased, stripped of
  // special characters, empty ones skipped: Data-Juicer's words_refinement.
  template <typename F>
  void ForEachRefinedWord(const std::string& text, F&& f) const {
    std::string lowered;
    auto refine = [&](std::string_view word) {
      text::LowerInto(word, &lowered);
      const std::string_view stripped = text::StripSpecial(lowered);
      if (!stripped.empty()) f(stripped);
    };
    if (pieces_) {
      thread_local model::SentencePieceScratch scratch;
      for (const std::string_view p : pieces_->Encode(text, &scratch)) refine(p);
    } else {
      text::ForEachWord(text, refine);
    }
  }

  // Appends, for each group size, every run of that many consecutive words
  // joined by words_aug_join_char.
  void Augment(std::vector<std::string>* words) const {
    const size_t n = words->size();
    for (size_t size : group_sizes_) {
      for (size_t i = 0; i + size <= n; ++i) {
        std::string joined = (*words)[i];
        for (size_t k = 1; k < size; ++k) joined += join_ + (*words)[i + k];
        words->push_back(std::move(joined));
      }
    }
  }

  std::shared_ptr<const WordLists> lists_;
  const WordSet* words_ = nullptr;
  std::shared_ptr<const model::SentencePiece> pieces_;
  bool augment_ = false;
  std::vector<size_t> group_sizes_{2};
  std::string join_;
};

}  // namespace

std::unique_ptr<Operator> MakeFlaggedWordsFilter(const recipe::OperatorSpec& spec,
                                                 const std::string& text_key) {
  return std::make_unique<WordListFilter>(spec, text_key, "flagged_words_ratio", "flagged_words",
                                          StatFilter::Range{"min_ratio", 0.0, "max_ratio", 0.045});
}

std::unique_ptr<Operator> MakeStopwordsFilter(const recipe::OperatorSpec& spec,
                                              const std::string& text_key) {
  return std::make_unique<WordListFilter>(spec, text_key, "stopwords_ratio", "stopwords",
                                          StatFilter::Range{"min_ratio", 0.3, "max_ratio", 1.0});
}

}  // namespace djshard::ops
