# src/net: the transports of the network stores.
#
# Name resolution, connects, the TLS module's loader and the byte stream
# (plain or TLS), in the store library for every network store.
libstore_la_SOURCES += %reldir%/net.c %reldir%/net.h %reldir%/tls.h \
	%reldir%/stream.c
# Each store that speaks TLS builds its own STORE-tls.so from these.
TLS_SOURCES = %reldir%/tls-openssl.c %reldir%/tls.h
TLS_LDFLAGS = -module -avoid-version -shared \
	-export-symbols-regex '^lr_tls_ops$$'
# gRPC over one HTTP/2 connection, for the etcd store.
GRPC_SOURCES = %reldir%/grpc.c %reldir%/grpc.h
