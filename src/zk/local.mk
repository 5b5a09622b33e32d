# --- store: zk --- ZooKeeper (single-threaded C client)
if WITH_ZK
pkglib_LTLIBRARIES += zk.la
zk_la_SOURCES = %reldir%/zk.c %reldir%/zk-session.c %reldir%/zk-session.h
zk_la_CFLAGS = $(AM_CFLAGS) $(ZK_CFLAGS)
zk_la_LIBADD = libstore.la $(ZK_LIBS)
zk_la_LDFLAGS = $(MODULE_LDFLAGS)
BATS_FILES += tests/zk.bats tests/zk-ensemble.bats
endif
EXTRA_DIST += tests/zk.bats tests/zk-ensemble.bats tests/zk-server.bash
dist_man_MANS += man/leaserun-zookeeper.7
# --- end zk
