# CMake generated Testfile for 
# Source directory: /work/main/src/node
# Build directory: /work/main/build/src/node
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
