# src/store: the store contract (store.h) and the store library.
#
# Helpers shared by the core and every store module: clocks, errors, the
# URL and duration grammar, the wait-set (no exits, no prints).  The
# transports add theirs (src/net/local.mk).
noinst_LTLIBRARIES = libstore.la
libstore_la_SOURCES = %reldir%/store-util.c %reldir%/url.c \
	%reldir%/url.h %reldir%/store.h \
	%reldir%/duration.c %reldir%/duration.h \
	%reldir%/waitset.c %reldir%/waitset.h
