#include "djshard/ops/operator.h"

#include <algorithm>

namespace djshard::ops {

namespace {

// Arguments every Data-Juicer operator accepts (its OP base class).
const char* const kCommonArgs[] = {
    "text_key",        "image_key",     "audio_key",           "video_key",
    "image_bytes_key", "system_key",    "instruction_key",     "prompt_key",
    "query_key",       "response_key",  "history_key",         "index_key",
    "work_dir",        "skip_op_error", "accelerator",         "batch_size",
    "num_proc",        "cpu_required",  "gpu_required",        "mem_required",
    "turbo",           "save_dir",      "min_closed_interval", "max_closed_interval",
    "reversed_range",
};

}  // namespace

Operator::Operator(const recipe::OperatorSpec& spec, const std::string& default_text_key,
                   const std::vector<std::string>& own_args)
    : name_(spec.name), args_(spec.args) {
  for (const std::string& key : args_.Keys()) {
    const bool common =
        std::find(std::begin(kCommonArgs), std::end(kCommonArgs), key) != std::end(kCommonArgs);
    const bool own = std::find(own_args.begin(), own_args.end(), key) != own_args.end();
    if (!common && !own) {
      std::string known;
      for (const std::string& a : own_args) known += (known.empty() ? "" : ", ") + a;
      args_.Fail(
          key, "is not an argument of " + name_,
          known.empty() ? "it takes only the common arguments" : "its own arguments: " + known);
    }
  }
  text_key_ = args_.GetString("text_key", default_text_key);
}

void Operator::RefuseTokenization() const {
  if (args_.GetBool("tokenization", false)) {
    args_.Fail("tokenization",
               "true needs a Hugging Face tokenizer, which djshard does not have yet",
               "set tokenization: false");
  }
}

Filter::Filter(const recipe::OperatorSpec& spec, const std::string& default_text_key,
               const std::vector<std::string>& own_args)
    : Operator(spec, default_text_key, own_args) {
  lo_closed_ = args().GetBool("min_closed_interval", true);
  hi_closed_ = args().GetBool("max_closed_interval", true);
  reversed_ = args().GetBool("reversed_range", false);
  if (reversed_) {
    lo_closed_ = !lo_closed_;
    hi_closed_ = !hi_closed_;
  }
}

bool Filter::InRange(double value, std::optional<double> lo, std::optional<double> hi) const {
  bool ok = true;
  if (lo) ok = lo_closed_ ? value >= *lo : value > *lo;
  if (ok && hi) ok = hi_closed_ ? value <= *hi : value < *hi;
  return reversed_ ? !ok : ok;
}

}  // namespace djshard::ops
