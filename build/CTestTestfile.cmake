# CMake generated Testfile for 
# Source directory: /work/main
# Build directory: /work/main/build
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
subdirs("proto")
subdirs("src/common")
subdirs("src/transport")
subdirs("src/master")
subdirs("src/node")
subdirs("src/client")
subdirs("src/cluster")
subdirs("bench")
subdirs("tools")
subdirs("tests")
