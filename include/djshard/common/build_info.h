#pragma once

namespace djshard {

// djshard's semantic version, e.g. "0.1.0".
const char* version();
// Short git commit of the build, "<sha>-dirty" for uncommitted sources, or "unknown".
const char* git_commit();

}  // namespace djshard
