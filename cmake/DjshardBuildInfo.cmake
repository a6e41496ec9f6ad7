# Generates build_info.cc with the git commit at every build, rewriting it only
# when the commit changes so that incremental builds stay incremental.
set(DJSHARD_BUILD_INFO_CC ${CMAKE_BINARY_DIR}/generated/build_info.cc)
add_custom_target(djshard_build_info
  COMMAND ${CMAKE_COMMAND}
          -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DOUTPUT=${DJSHARD_BUILD_INFO_CC}
          -DVERSION=${PROJECT_VERSION}
          -P ${CMAKE_SOURCE_DIR}/cmake/WriteBuildInfo.cmake
  BYPRODUCTS ${DJSHARD_BUILD_INFO_CC}
  COMMENT "djshard build info")
