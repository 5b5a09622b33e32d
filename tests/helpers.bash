# helpers.bash - shared by the bats files.  Real processes only.
bats_require_minimum_version 1.5.0
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

: "${LEASERUN:?LEASERUN must name the leaserun binary (make check sets it)}"
: "${LR_BUILDDIR:=$(dirname "$LEASERUN")}"
export LEASERUN_MODULE_DIR="${LEASERUN_MODULE_DIR:-$LR_BUILDDIR/.libs}"

# Options a caller's environment could set must not leak into the tests.
unset LEASERUN_TTL LEASERUN_RENEW LEASERUN_WAIT LEASERUN_KILL_AFTER \
	LEASERUN_SIGNAL LEASERUN_CONFLICT_EXIT_CODE LEASERUN_LOG_FORMAT \
	LEASERUN_URL_FILE

lr() { "$LEASERUN" "$@"; }

# A fresh lock directory per test, used through LEASERUN_URL.
lockdir_setup() {
	LOCKDIR=$(mktemp -d "${BATS_TEST_TMPDIR:-/tmp}/locks.XXXXXX")
	export LOCKDIR
	export LEASERUN_URL="file://$LOCKDIR"
}

# wait_until SECONDS CMD...: runs CMD every 20ms until it succeeds or
# SECONDS pass (then fails, so a test never hangs).
wait_until() {
	local limit=$(($(date +%s%N) + ${1%.*} * 1000000000)); shift
	until "$@"; do
		if (($(date +%s%N) > limit)); then
			echo "timed out waiting for: $*" >&2
			return 1
		fi
		sleep 0.02
	done
}

alive() { kill -0 "$1" 2>/dev/null; }
# A zombie is dead too: it waits only for its parent to reap it.
dead() {
	! kill -0 "$1" 2>/dev/null ||
		[ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" = Z ]
}
exists() { [ -s "$1" ]; }

# wait_rc PID: waits for a background job of this shell, sets rc.
wait_rc() { rc=0; wait "$1" || rc=$?; }

# with_default_signals CMD...: execs CMD with INT and QUIT at their default
# action (bash starts background jobs with them ignored).
with_default_signals() {
	exec perl -e '$SIG{$_} = "DEFAULT" for qw(INT QUIT); exec @ARGV or die "exec: $!"' -- "$@"
}

# check_intervals LOG: lines "start end fence"; no two intervals overlap
# and fences strictly increase in the order the intervals happened.
check_intervals() {
	sort -n "$1" | awk '
		NR > 1 && $1 < prev_end { printf "overlap at line %d: %s starts before %s\n", NR, $1, prev_end; bad = 1 }
		NR > 1 && $3 <= prev_fence { printf "fence %s not above %s\n", $3, prev_fence; bad = 1 }
		{ prev_end = $2; prev_fence = $3; n++ }
		END { if (!bad) printf "%d intervals, no overlap, fences increase\n", n; exit bad }'
}
