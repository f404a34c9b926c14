# CMake generated Testfile for 
# Source directory: /work/main/src/client
# Build directory: /work/main/build-transport/src/client
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
