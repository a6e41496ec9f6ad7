#pragma once

#include <string>
#include <string_view>

#include "src/ops/unicode_normalization.h"

// A native port of ftfy 6.3.1's fix_text() with its default configuration
// (the one Data-Juicer's fix_unicode_mapper uses), the normalization form
// aside: HTML entities, terminal escapes, mojibake, C1 controls, Latin
// ligatures, character width, curly quotes, line breaks, surrogates, control
// characters and Unicode normalization, fixed line by line.
namespace djshard::ops::ftfy {

// ftfy.fix_text(text, normalization=form). `text` is valid UTF-8.
std::string FixText(std::string_view text, unicode::NormalForm form);

}  // namespace djshard::ops::ftfy
