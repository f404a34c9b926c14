# CMake generated Testfile for 
# Source directory: /work/main/src/common
# Build directory: /work/main/build/src/common
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test([=[common_test]=] "/work/main/build/tests/common_test")
set_tests_properties([=[common_test]=] PROPERTIES  TIMEOUT "300" _BACKTRACE_TRIPLES "/work/main/CMakeLists.txt;45;add_test;/work/main/src/common/CMakeLists.txt;4;kvpool_test;/work/main/src/common/CMakeLists.txt;0;")
