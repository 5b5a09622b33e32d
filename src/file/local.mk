# --- store: file --- flock(2) on DIR/NAME.lock, built in
# Not a module: the core (leaserun) and the test-only fault store
# (fault.la) are built with it, from FILE_SOURCES.  Its tests,
# tests/file.bats, are among the core's (CORE_BATS): they need no server.
FILE_SOURCES = %reldir%/file.c %reldir%/file.h
dist_man_MANS += man/leaserun-file.7
# --- end file
