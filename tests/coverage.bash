# coverage.bash - loaded by every bats file (most through helpers.bash).
# For the coverage pass of the mutation run (tests/mutate/run): with
# LR_COVERAGE_DIR set, the processes of each test write the counts of a
# build made with --coverage (gcov) to a directory of the test's own,
# named by its number in the file, so that a mutant is run against the
# tests that reach its line and no others.
if [ -n "${LR_COVERAGE_DIR:-}" ] && [ -n "${BATS_TEST_NUMBER:-}" ]; then
	export GCOV_PREFIX=$LR_COVERAGE_DIR/$BATS_TEST_NUMBER
	export GCOV_PREFIX_STRIP=${LR_COVERAGE_STRIP:?}
fi
