# coverage.bash - loaded by every bats file (most through helpers.bash).
# For the coverage pass of the mutation run (tests/mutate/run): with
# LR_COVERAGE_DIR set, the processes of each test write the counts of a
# build made with --coverage (gcov) to a directory of the test's own,
# named by its number in the file, so that a mutant is run against the
# tests that reach its line and no others.  The directory is also
# written to ../current, for the processes that run without our
# environment (tests/mutate/gcov-dump.h), and it and the directories of
# the counts (LR_COVERAGE_SUBDIRS, colon-separated) are made writable by
# all, for those that run as another user.
if [ -n "${LR_COVERAGE_DIR:-}" ] && [ -n "${BATS_TEST_NUMBER:-}" ]; then
	export GCOV_PREFIX=$LR_COVERAGE_DIR/$BATS_TEST_NUMBER
	export GCOV_PREFIX_STRIP=${LR_COVERAGE_STRIP:?}
	(
		cd "$LR_COVERAGE_DIR" && mkdir -p "$BATS_TEST_NUMBER" &&
			cd "$BATS_TEST_NUMBER" || exit
		IFS=: read -ra sub <<<"${LR_COVERAGE_SUBDIRS:-}"
		[ ${#sub[@]} = 0 ] || mkdir -p "${sub[@]}"
		find . -type d -exec chmod 1777 {} +
	)
	echo "$GCOV_PREFIX $GCOV_PREFIX_STRIP" >"${LR_COVERAGE_DIR%/*}/current"
fi
