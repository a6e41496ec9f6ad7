// Fuzzes the recipe loader and plan compiler: any file is loaded and
// compiled or refused with djshard's Error.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "djshard/common/error.h"
#include "djshard/exec/plan.h"
#include "djshard/recipe/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace djshard;
  static const std::string path =
      "/tmp/djshard-recipe-fuzz-" + std::to_string(::getpid()) + ".yaml";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const recipe::Recipe recipe = recipe::LoadRecipe(path);
    exec::CompilePlan(recipe, ops::Registry::Global(), /*skip_unimplemented=*/true);
  } catch (const Error&) {
  }
  return 0;
}
