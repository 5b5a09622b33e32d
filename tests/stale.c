/* stale.c - a store module built for another interface version, so the
 * tests can show the loader refuses it.  Never installed. */
#include "config.h"

#include "store/store.h"

const struct lr_store_ops lr_store_ops = {
	.abi = 0,
	.name = "stale",
};
