# Every dependency is a Debian package installed by scripts/setup.sh.
find_package(CLI11 CONFIG REQUIRED)
# The binary's logging (apps/ only; libspdlog-dev).
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json 3.10 CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(simdjson CONFIG REQUIRED)
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

# zstd ships a CMake config on Debian; fall back to pkg-config elsewhere.
find_package(zstd CONFIG QUIET)
if(TARGET zstd::libzstd_shared)
  set(DJSHARD_ZSTD_TARGET zstd::libzstd_shared)
elseif(TARGET zstd::libzstd_static)
  set(DJSHARD_ZSTD_TARGET zstd::libzstd_static)
else()
  pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
  set(DJSHARD_ZSTD_TARGET PkgConfig::ZSTD)
endif()

pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# Unicode normalization and properties for the tokenizers (libutf8proc-dev).
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
# SentencePiece models for `tokenization: true` (libsentencepiece-dev).
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
# OpenCC for chinese_convert_mapper (libopencc-dev, with its dictionaries).
pkg_check_modules(OPENCC REQUIRED IMPORTED_TARGET opencc)
# Gumbo, an HTML5 parser, for clean_html_mapper (libgumbo-dev).
pkg_check_modules(GUMBO REQUIRED IMPORTED_TARGET gumbo)
# XXH3-128, the checksum of every file djshard checks itself (libxxhash-dev).
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)

# fastText (Debian's libfasttext-dev) for language_id_score_filter.
find_library(DJSHARD_FASTTEXT_LIBRARY NAMES fasttext REQUIRED)
find_path(DJSHARD_FASTTEXT_INCLUDE fasttext/fasttext.h REQUIRED)

# libtorch: Debian's CPU build by default. A CUDA-enabled libtorch is used
# instead when its prefix comes first in CMAKE_PREFIX_PATH, for example
#   -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
if(DJSHARD_WITH_TORCH)
  find_package(Torch REQUIRED)
  message(STATUS "djshard: libtorch ${Torch_VERSION} from ${Torch_DIR}")
endif()
