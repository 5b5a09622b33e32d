# --- store: etcd --- etcd v3 (gRPC: libnghttp2, protobuf-c)
if WITH_ETCD
pkglib_LTLIBRARIES += etcd.la
etcd_la_SOURCES = %reldir%/etcd.c %reldir%/etcd-rpc.c \
	%reldir%/etcd-lock.c %reldir%/etcd-runs.c %reldir%/etcd-list.c \
	%reldir%/etcd.h $(GRPC_SOURCES)
nodist_etcd_la_SOURCES = %reldir%/etcd.pb-c.c %reldir%/etcd.pb-c.h
etcd_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_builddir)/src
etcd_la_CFLAGS = $(AM_CFLAGS) $(ETCD_CFLAGS)
etcd_la_LIBADD = libstore.la $(ETCD_LIBS)
etcd_la_LDFLAGS = $(MODULE_LDFLAGS)
BATS_FILES += tests/etcd.bats tests/etcd-cluster.bats tests/etcd-tls.bats
# TLS for etcds://, in a module of its own so that etcd:// maps no TLS
# library (see src/net/tls.h).
if WITH_TLS
pkglib_LTLIBRARIES += etcd-tls.la
etcd_tls_la_SOURCES = $(TLS_SOURCES)
etcd_tls_la_CFLAGS = $(AM_CFLAGS) $(OPENSSL_CFLAGS)
etcd_tls_la_LIBADD = libstore.la $(OPENSSL_LIBS)
etcd_tls_la_LDFLAGS = $(TLS_LDFLAGS)
endif
BUILT_SOURCES += %reldir%/etcd.pb-c.c %reldir%/etcd.pb-c.h
CLEANFILES += %reldir%/etcd.pb-c.c %reldir%/etcd.pb-c.h
# The messages of etcd's API that the store uses (see etcd.proto), into
# the build tree's %reldir%.  One run of protoc-c writes both files.
%reldir%/etcd.pb-c.c: %reldir%/etcd.proto
	$(AM_V_GEN)$(MKDIR_P) %reldir% && \
	$(PROTOC_C) --c_out=%reldir% -I$(srcdir)/%reldir% \
		$(srcdir)/%reldir%/etcd.proto
%reldir%/etcd.pb-c.h: %reldir%/etcd.pb-c.c
	@test -f $@ || { rm -f %reldir%/etcd.pb-c.c; \
		$(MAKE) $(AM_MAKEFLAGS) %reldir%/etcd.pb-c.c; }
endif
EXTRA_DIST += %reldir%/etcd.proto tests/etcd.bats tests/etcd-cluster.bats \
	tests/etcd-tls.bats tests/etcd-server.bash
dist_man_MANS += man/leaserun-etcd.7
# --- end etcd
