# CMake generated Testfile for 
# Source directory: /work/main/src/master
# Build directory: /work/main/build/src/master
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test([=[master_test]=] "/work/main/build/tests/master_test")
set_tests_properties([=[master_test]=] PROPERTIES  TIMEOUT "300" _BACKTRACE_TRIPLES "/work/main/CMakeLists.txt;45;add_test;/work/main/src/master/CMakeLists.txt;5;kvpool_test;/work/main/src/master/CMakeLists.txt;0;")
