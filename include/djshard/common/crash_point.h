#pragma once

namespace djshard {

// Crash injection for black-box tests of the job protocol: when the
// environment variable DJSHARD_TEST_KILL_AT names `point`, the process kills
// itself with SIGKILL right there, as a node that loses power would stop.
// Points: "before_claim", "after_claim", "after_output", "after_link".
void CrashPoint(const char* point);

}  // namespace djshard
