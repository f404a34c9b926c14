# CMake generated Testfile for 
# Source directory: /work/main/src/transport
# Build directory: /work/main/build/src/transport
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test([=[transport_test]=] "/work/main/build/tests/transport_test")
set_tests_properties([=[transport_test]=] PROPERTIES  TIMEOUT "300" _BACKTRACE_TRIPLES "/work/main/CMakeLists.txt;45;add_test;/work/main/src/transport/CMakeLists.txt;5;kvpool_test;/work/main/src/transport/CMakeLists.txt;0;")
