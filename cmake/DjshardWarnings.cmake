# Strict warnings for djshard's own targets (third-party headers are SYSTEM).
function(djshard_strict_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
endfunction()
