/*
 * curl-floor.c - the least any libcurl client pays per run: start, load
 * libcurl (and the libraries it needs), curl_global_init(), exit.  It
 * talks to nobody.  bench/etcd.sh times it beside leaserun and etcdctl,
 * so the figures show how much of leaserun's time and memory is libcurl's
 * and how close any libcurl-based client could come to a target.
 */
#include <curl/curl.h>

int main(void)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return 1;
	curl_global_cleanup();
	return 0;
}
